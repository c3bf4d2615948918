#!/usr/bin/env bash
# Session 23, call 6 (one H100): final code, with the MXFP8 experts' W (expanded) and
# per-expert Wᵀ from one read. GPU tests (grouped layer and kernels first, then the changed
# register kernels' dense tests); the grouped ops, every targeted recipe (fwd+bwd,
# graph-replayed); the moe-1b step (CUDA graph), bf16 / fp8_blockwise / mxfp8 / nvfp4.
#     run: timeout 590 bash benchmarks/sessions/run_session23f_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s23f; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session23f.tgz" -C "$OUT" .; }
TAIL=6 step 150 gpu_tests_grouped.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_grouped_gpu.py tests/test_gemm_grouped.py
pack
TAIL=6 step 120 gpu_tests_kernels.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_kernels_quant.py -k "fp8_rowcol or rowcol_reg or weight_pair or fp8_view or mxfp8_rowcol"
pack
TAIL=40 step 100 moe_ops.log python3 benchmarks/bench_moe.py --no-train --graph \
  --recipes fp8_blockwise,mxfp8,nvfp4
pack
TAIL=10 step 200 moe1b.log python3 benchmarks/bench_moe.py --shapes qwen3_down \
  --recipes fp8_blockwise --train-graph step --train-recipes fp8_blockwise,mxfp8,nvfp4
pack
