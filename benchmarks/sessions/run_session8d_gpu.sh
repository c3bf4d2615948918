#!/usr/bin/env bash
# Session 8, fourth call: where the 1b FP8 steps spend their time (profiles of fp8_blockwise and
# fp8_tensorwise beside bf16) and the 1b mxfp8 step. Back: $OUT/session8d.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=10 step "${T1B_SECS:-420}" train_1b.log python3 benchmarks/bench_train.py \
  --models 1b --recipes bf16,fp8_blockwise,mxfp8 --graph step --steps 8 --warmup 2 \
  --profile bf16,fp8_blockwise,fp8_tensorwise --out "$OUT/train_1b.json"
pack_out session8d.tgz
