#!/usr/bin/env bash
# Session 33, call 4 (one H100/H200, ~9 minutes): NVFP4's α in the Triton GEMM's epilogue for
# fp32 outputs (wgrad's; gemm_paths.EPILOGUE["fp32"], MICROSCALE_ALPHA_FP32): the GPU tests
# with it on (the kernel at an fp32 output, every layer / training-step / MLP nvfp4 test),
# the layer A/B at issue 12's shape, the 125m nvfp4 step A/B in one process.
#     run: timeout 590 bash benchmarks/sessions/run_session33d_gpu.sh     (at 1b85908: the switch and
#     its kernel set were removed after this call, a35a605)
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
MICROSCALE_ALPHA_FP32=1 TAIL=6 step 300 tests.txt python3 -m pytest -q -m gpu \
  tests/test_gemm_alpha.py tests/test_linear.py tests/test_train_gpu.py tests/test_mlp.py \
  -k "alpha or nvfp4"
TAIL=8 step 90 bench_linear.txt python3 benchmarks/bench_linear.py \
  --recipes nvfp4,nvfp4@alpha-fp32,nvfp4_no_sr,nvfp4_no_sr@alpha-fp32,nvfp4
TAIL=8 step 170 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes bf16,nvfp4,nvfp4@alpha-fp32,nvfp4
