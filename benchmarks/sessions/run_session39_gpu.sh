#!/usr/bin/env bash
# Session 39, call 1 (one H100/H200, ~9 minutes): session 38's last commit's owed GPU tests (the
# NVFP4 recompute and fused-MLP tests at df76242's code), the new rule's GPU tests (NVFP4's α
# in the Triton GEMM's epilogue for fp32 weight gradients with enough output tiles,
# gemm_paths.EPILOGUE["fp32_min_tiles"]), the wgrad GEMMs timed both ways at the 125m / 350m /
# 1b shapes, and the 1b step in one process with the rule at 128 and 512 tiles.
#     run: timeout 590 bash benchmarks/sessions/run_session39_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=14 step 200 tests.txt python3 -m pytest -q -rA -m gpu --tb=short \
  "tests/test_recompute.py::test_nvfp4_column_amax_alone" \
  "tests/test_recompute.py::test_same_bits_on_cuda_with_the_kernels" \
  "tests/test_mlp.py::test_same_bits_on_cuda_with_the_kernels" \
  "tests/test_mlp.py::test_gpu_du_in_dgrad_same_bits" \
  "tests/test_mlp.py::test_gpu_same_bits_with_wgrad_alpha_in_the_epilogue" \
  "tests/test_gemm_alpha.py::test_gpu_layer_wgrad_alpha_in_the_epilogue" \
  "tests/test_gemm_alpha.py::test_gpu_alpha_mm_tma_and_pointer" -k "nvfp4 or alpha"
TAIL=16 step 60 wgrad.txt python3 benchmarks/bench_alpha_mm.py --wgrad
TAIL=12 step 320 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,nvfp4@alpha-fp32-128,nvfp4@alpha-fp32-512,nvfp4 --out "$OUT/train_1b.json"
