#!/usr/bin/env bash
# Session 23, call 4 (one H100): the experts' W and per-expert Wᵀ from one read (the register
# pair kernel with per-expert column segments). GPU tests of the grouped path and of the
# changed FP8 register kernel (dense pairs and weight pairs included); the fp8_blockwise
# grouped ops with a profile; the moe-1b step (CUDA graph) with the final code, every recipe.
#     run: timeout 590 bash benchmarks/sessions/run_session23d_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s23d; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session23d.tgz" -C "$OUT" .; }
TAIL=12 step 210 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider -x \
  tests/test_grouped_gpu.py tests/test_gemm_grouped.py tests/test_grouped.py \
  tests/test_kernels_quant.py -k "grouped or gather or pair or fp8_rowcol or rowcol_reg or fp8_view or tma or sync or compiles"
pack
TAIL=30 step 90 moe_ops.log python3 benchmarks/bench_moe.py --no-train --graph \
  --recipes fp8_blockwise --profile fp8_blockwise
pack
TAIL=10 step 230 moe1b.log python3 benchmarks/bench_moe.py --shapes qwen3_down \
  --recipes fp8_blockwise --train-graph step --train-recipes fp8_blockwise,mxfp8,nvfp4
pack
