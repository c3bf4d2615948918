#!/usr/bin/env bash
# Session 53, call 5 (one H200, ~6 minutes). relu(u)²'s two NVFP4 amaxes measured in the up
# projection's fprop epilogue too (nn.mlp.CONFIG["U_AMAX_IN_FPROP"], on; relu² applied to the
# stored u there for the amaxes alone), beside du's in the down projection's dgrad (call 4):
# the MLP runs no amax pass over u or du. GPU tests (the kernel's amaxes of y and of relu²(y)
# against the reference's; the MLP's bits against three modules with both on), then 1b
# training with both on against both off ("@gemm-amax-off"), alternated, bf16 first and last.
#     run (carry [".whl"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session53e_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=4 step 220 gpu_tests.txt python3 -m pytest -q -p no:benchmark -m gpu \
  tests/test_gemm_alpha.py tests/test_mlp.py -k "out_amax or gpu_du_in_dgrad or same_bits_on_cuda"
TAIL=9 step 300 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4@gemm-amax-off,nvfp4,nvfp4@gemm-amax-off,nvfp4,bf16 \
  --out "$OUT/train_1b.json"
