#!/usr/bin/env bash
# Session 38, call 3 (one H100, ~8 minutes): NVFP4 in the recompute default (layers 2048+
# wide: the 1b MLP down projection). The compiled zoo model with and without the recompute
# (nvfp4 added) and the recompute layer on the kernels; then 1b in one process: bf16, nvfp4
# (now recomputing), nvfp4_no_sr, nvfp4@no-recompute (the kept xᵀ), nvfp4.
#     run: timeout 590 bash benchmarks/sessions/run_session38c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=10 step 200 tests.txt python3 -m pytest -q -rA -m gpu --tb=short \
  "tests/test_recompute.py::test_compiled_zoo_model_same_with_and_without_recompute_on_cuda" \
  "tests/test_recompute.py::test_same_bits_on_cuda_with_the_kernels" -k "nvfp4"
TAIL=9 step 340 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,nvfp4_no_sr,nvfp4@no-recompute,nvfp4 --out "$OUT/train_1b.json"
