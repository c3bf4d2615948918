#!/usr/bin/env bash
# Session 50, call 2 (prepared in session 49; one H200, ~6 minutes): the README's 1b row, second
# half: bf16, mxfp4, nvfp4, nvfp4_no_sr, bf16 in one process (no FP8 blockwise GEMM: DeepGEMM
# not needed).
#     run (carry [".whl"]): OUT=$OUT timeout 420 bash benchmarks/sessions/run_session50b_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=10 step 400 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,mxfp4,nvfp4,nvfp4_no_sr,bf16 --out "$OUT/train_1b.json"
