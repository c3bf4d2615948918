#!/usr/bin/env bash
# Session 46, call 4 (one H200, ~9 minutes): issue 11's 1b row again, every recipe and torchao
# float8 in one process with bf16 first and last. Session 44's row (the README's) had one bf16
# run at 86,925 tok/s; sessions 45-46 read bf16 at 93,000-94,300 in five other runs, so that
# row's ratios may be high by up to ~8%.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session46d_gpu.sh  (carry .whl)
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=16 step 575 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 --torchao \
  --recipes bf16,fp8_tensorwise,fp8_blockwise,mxfp8,mxfp4,nvfp4,nvfp4_no_sr,bf16 \
  --out "$OUT/train_1b.json"
