#!/usr/bin/env bash
# Session 32, call 5 (one H100/H200, ~9.5 minutes): the README's 1b training table (every
# recipe and torchao float8, one process) at this session's defaults.
#     run: timeout 595 bash benchmarks/sessions/run_session32e_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=16 step 580 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 --torchao \
  --recipes bf16,fp8_tensorwise,fp8_blockwise,mxfp8,mxfp4,nvfp4,nvfp4_no_sr \
  --out "$OUT/train_1b.json"
