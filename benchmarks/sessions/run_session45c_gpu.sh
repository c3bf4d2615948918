#!/usr/bin/env bash
# Session 45, call 4 (one H200, ~6 minutes): the README's 125m row at this code (MXFP8 weights
# grouped and expanded; wgrad's xᵀ kept expanded in layers at most 1024 wide, EXPAND_XT
# "auto"), every recipe and torchao float8 in one process with bf16 first and last, and each
# recipe the rule touches again with xᵀ kept as codes (@xt-codes, the rule's A/B).
#     run: OUT=$OUT timeout 560 bash benchmarks/sessions/run_session45c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=22 step 520 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --torchao \
  --recipes bf16,fp8_tensorwise,fp8_blockwise,mxfp8,mxfp8@xt-codes,mxfp4,mxfp4@xt-codes,nvfp4,nvfp4@xt-codes,nvfp4_no_sr,nvfp4_no_sr@xt-codes,bf16 \
  --out "$OUT/train_125m.json"
