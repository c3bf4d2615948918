#!/usr/bin/env bash
# Session 46, call 5 (one H200, ~5 minutes): where 1b fp8_blockwise's last percent is on the
# H200 (it reads 1.183-1.208x against its 1.2x): the FP8 128x128 weight quantizers at the 1b
# weight set against the copy rate (bench_many: one launch vs one per weight; 35% of the copy
# rate on an H100, session 23), and a profile of one fp8_blockwise and one fp8_tensorwise step.
#     run: OUT=$OUT timeout 400 bash benchmarks/sessions/run_session46e_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step 90 many.txt python3 benchmarks/bench_many.py --models 1b
TAIL=6 step 280 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 4 --models 1b --batch 8 --seq 2048 --recipes fp8_blockwise \
  --profile fp8_blockwise,fp8_tensorwise --out "$OUT/train_1b.json"
