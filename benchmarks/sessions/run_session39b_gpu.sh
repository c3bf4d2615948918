#!/usr/bin/env bash
# Session 39, call 2 (one H100/H200, ~9 minutes): the α kernel's GPU tests call 1's time limit cut
# (alpha_mm through TMA and pointers, fp32 and bf16 outputs; the layer with the epilogue on and
# off), ms.Linear nvfp4 at issue 12's shape with fp32_min_tiles at 128 (the new default) and
# off, and the 1b step in one process: nvfp4 (default), @no-alpha-fp32, @xt-expanded (wgrad's
# xᵀ kept in bf16: memory against the decode passes), plus a profile of one nvfp4 step.
#     run: timeout 590 bash benchmarks/sessions/run_session39b_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=14 step 100 tests.txt python3 -m pytest -q -rA -m gpu --tb=short \
  "tests/test_gemm_alpha.py::test_gpu_alpha_mm_tma_and_pointer" \
  "tests/test_gemm_alpha.py::test_gpu_layer_epilogue_on_and_off"
TAIL=14 step 100 bench_linear.txt python3 benchmarks/bench_linear.py \
  --recipes nvfp4,nvfp4@no-alpha-fp32,nvfp4_no_sr,nvfp4
TAIL=14 step 370 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 --profile nvfp4 \
  --recipes bf16,nvfp4,nvfp4@no-alpha-fp32,nvfp4@xt-expanded,nvfp4 --out "$OUT/train_1b.json"
