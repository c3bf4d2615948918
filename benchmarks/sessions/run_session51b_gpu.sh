#!/usr/bin/env bash
# Session 51, call 2 (prepared in session 50, not yet run; one H200, ~5 minutes): where 1b
# nvfp4's quantize time goes, by tensor: one replay of the captured step each for nvfp4 and
# nvfp4_no_sr with the profile's `quantize_durations` (each quantize / dequantize kernel's
# launches bucketed by duration, so by tensor size), beside a bf16 run.
#     run (carry [".whl"]): OUT=$OUT timeout 420 bash benchmarks/sessions/run_session51b_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=8 step 400 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 4 --models 1b --batch 8 --seq 2048 --recipes bf16 --profile nvfp4,nvfp4_no_sr \
  --out "$OUT/train_1b.json"
