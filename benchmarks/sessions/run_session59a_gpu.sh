#!/usr/bin/env bash
# Session 59, call 1 (one H200, ~6 minutes): session 58's last change (99c5ef9: gemm_alpha's
# NARROW_TILE only for plain 2-byte output, no epilogue, no tile overrides, the TMA kernel) on
# the GPU: the α GEMM, MLP and row-kernel GPU tests; then 50m nvfp4 training with and without
# the narrow tile (the only zoo size whose widths, 640 and 128, take it), alternated in one
# process, bf16 first and last.
#     run: OUT=$OUT timeout 560 bash benchmarks/sessions/run_session59a_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=8 step 260 gpu_tests.txt python3 -m pytest -q -n 4 -m gpu -rf -p no:cacheprovider \
  tests/test_gemm_alpha.py tests/test_mlp.py tests/test_kernels_nvfp4_row.py
TAIL=14 step 270 train_50m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --models 50m --recipes bf16,nvfp4,nvfp4@no-narrow,nvfp4,nvfp4@no-narrow,bf16 \
  --out "$OUT/train_50m.json"
