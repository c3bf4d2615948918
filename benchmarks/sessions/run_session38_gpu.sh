#!/usr/bin/env bash
# Session 38, call 1 (one H100, ~9 minutes): NVFP4's recomputed xᵀ takes the amax forward
# measured beside fprop's view (an amax_only column view: no second amax pass over u in
# backward). Its GPU tests (the op on the kernels, the recompute layer, the fused relu² MLP
# with recompute, du in the dgrad epilogue with recompute), then the 1b step in one process:
# bf16, nvfp4 (xᵀ kept, the default), nvfp4@recompute, twice each (issue 11's 0.9x line).
#     run: timeout 590 bash benchmarks/sessions/run_session38_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=10 step 170 tests.txt python3 -m pytest -q -rA -m gpu --tb=short \
  "tests/test_recompute.py::test_nvfp4_column_amax_alone" \
  "tests/test_recompute.py::test_same_bits_on_cuda_with_the_kernels" \
  "tests/test_mlp.py::test_same_bits_on_cuda_with_the_kernels" \
  "tests/test_mlp.py::test_gpu_du_in_dgrad_same_bits" -k "nvfp4"
TAIL=12 step 400 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,nvfp4@recompute,nvfp4,nvfp4@recompute,bf16 --out "$OUT/train_1b.json"
