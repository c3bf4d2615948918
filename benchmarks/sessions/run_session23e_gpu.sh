#!/usr/bin/env bash
# Session 23, call 5 (one H100): final code. GPU tests of the grouped path and of the changed
# FP8 register kernel (dense pairs, weight pairs, row-map pair, expert weight pairs); the
# grouped ops, every recipe the issue targets (fwd+bwd, graph-replayed); a 125m dense step,
# bf16 and fp8_blockwise, to check the changed dense kernel did not move.
#     run: timeout 590 bash benchmarks/sessions/run_session23e_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s23e; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session23e.tgz" -C "$OUT" .; }
TAIL=12 step 270 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_grouped_gpu.py tests/test_gemm_grouped.py tests/test_grouped.py \
  tests/test_kernels_quant.py -k "grouped or pair or fp8_rowcol or rowcol_reg or fp8_view or tma or sync or compiles"
pack
TAIL=40 step 120 moe_ops.log python3 benchmarks/bench_moe.py --no-train --graph \
  --recipes fp8_blockwise,mxfp8,nvfp4
pack
TAIL=8 step 150 train_125m.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes bf16,fp8_blockwise --out "$OUT/train_125m.json"
pack
