#!/usr/bin/env bash
# Session 47, call 5 (one H200, ~5 minutes): the 125m row re-measured on this code (the README's
# is session 45's, before the FP8 many-weight kernel): every recipe and torchao float8 in one
# process, bf16 first and last.
#     run: OUT=$OUT timeout 420 bash benchmarks/sessions/run_session47e_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=16 step 400 train_125m.txt python3 benchmarks/bench_train.py --graph step --models 125m \
  --torchao --out "$OUT/train_125m.json"
