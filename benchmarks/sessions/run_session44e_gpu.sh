#!/usr/bin/env bash
# Session 44, call 5 (one H200, ~8 minutes): the 125m row of the README's table at this code,
# every recipe and torchao float8 in one process with bf16 first and last (the ratios take the
# faster), then 1b again with bf16 first and last (call 4's bf16 ran 188.5 ms a step against
# 176.5 in call 2, which flattered every ratio of that process).
#     run: OUT=$OUT timeout 540 bash benchmarks/sessions/run_session44e_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=16 step 260 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --torchao \
  --recipes bf16,fp8_tensorwise,fp8_blockwise,mxfp8,mxfp4,nvfp4,nvfp4_no_sr,bf16 \
  --out "$OUT/train_125m.json"
TAIL=12 step 250 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,fp8_blockwise,nvfp4,mxfp8,bf16 --out "$OUT/train_1b.json"
