#!/usr/bin/env bash
# Session 38, call 2 (the H100 of call 1, warm): call 1's GPU tests again with more time (its
# 170 s cut them after 4 of 10), then the 1b A/B in the other order: bf16, nvfp4@recompute,
# nvfp4, nvfp4@recompute, nvfp4.
#     run: timeout 590 bash benchmarks/sessions/run_session38b_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=16 step 300 tests.txt python3 -m pytest -q -rA -m gpu --tb=short \
  "tests/test_recompute.py::test_nvfp4_column_amax_alone" \
  "tests/test_recompute.py::test_same_bits_on_cuda_with_the_kernels" \
  "tests/test_mlp.py::test_same_bits_on_cuda_with_the_kernels" \
  "tests/test_mlp.py::test_gpu_du_in_dgrad_same_bits" -k "nvfp4"
TAIL=9 step 280 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4@recompute,nvfp4,nvfp4@recompute,nvfp4 --out "$OUT/train_1b.json"
