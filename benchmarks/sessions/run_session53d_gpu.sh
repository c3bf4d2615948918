#!/usr/bin/env bash
# Session 53, call 4 (one H200, ~9 minutes). du's two NVFP4 amaxes measured in the epilogue
# of the GEMM that writes du (the down projection's dgrad, NVFP4's α kernel: max|du| and
# max|RHT(du)| down the columns; nn.mlp.CONFIG["DU_AMAX_IN_DGRAD"], on), so the up
# projection's dy pair runs no amax pass over du. Its GPU tests (the kernel's amaxes against
# the reference's of its output; the MLP's bits against three modules), then the 1b MLP in
# bench_block with the default and "@du-amax-off" alternated twice (call 3 showed row-order
# effects of a few percent: each config appears twice), then 1b training (bench_train).
#     run (carry [".whl"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session53d_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=4 step 200 gpu_tests.txt python3 -m pytest -q -p no:benchmark -m gpu \
  tests/test_gemm_alpha.py tests/test_mlp.py -k "out_amax or gpu_du_in_dgrad"
TAIL=10 step 170 block_1b_mlp.txt python3 benchmarks/bench_block.py --model 1b --part mlp \
  --recipes bf16,nvfp4@du-amax-off,nvfp4,nvfp4@du-amax-off,nvfp4 --repeat 7
TAIL=7 step 200 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4@du-amax-off,nvfp4,bf16 --out "$OUT/train_1b.json"
