#!/usr/bin/env bash
# Session 23, call 2 (one H100): TMA grouped FP8 GEMMs on by default (per-shape tiles from
# call 1's sweep). GPU tests of the grouped GEMM and layer; the grouped ops with a per-kernel
# profile of one fp8_blockwise / mxfp8 fwd+bwd per shape (where the op's time goes); the moe-1b
# step, bf16 and fp8_blockwise, with TMA on and (another process) off.
#     run: timeout 590 bash benchmarks/sessions/run_session23b_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s23b; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session23b.tgz" -C "$OUT" .; }
TAIL=8 step 100 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_gemm_grouped.py tests/test_grouped.py tests/test_grouped_weight_view.py
pack
TAIL=150 step 120 moe_ops_profile.log python3 benchmarks/bench_moe.py --no-train --graph \
  --recipes fp8_blockwise,mxfp8 --profile fp8_blockwise,mxfp8
pack
M="benchmarks/bench_moe.py --shapes qwen3_down --recipes fp8_blockwise --train-recipes fp8_blockwise"
TAIL=12 step 150 moe1b_tma.log python3 $M
pack
TAIL=12 step 150 moe1b_ptr.log env MICROSCALE_GROUPED_TMA=0 python3 $M
pack
