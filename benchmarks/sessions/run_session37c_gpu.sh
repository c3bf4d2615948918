#!/usr/bin/env bash
# Session 37, call 5 (one H100, ~6 minutes): the README's H100 figures at this session's
# defaults. 1b: bf16, nvfp4 (the down projection's xᵀ now recomputed by default, written
# expanded), nvfp4@no-recompute (session 36's default), nvfp4_no_sr, bf16 again; 125m: bf16,
# mxfp8, mxfp8@xt-expanded (EXPAND_XT, opt-in: 0.834x -> 0.854x on call 4's H200).
#     run: timeout 500 bash benchmarks/sessions/run_session37c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=9 step 270 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,nvfp4@no-recompute,nvfp4_no_sr,bf16 --out "$OUT/train_1b.json"
TAIL=7 step 180 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes bf16,mxfp8,mxfp8@xt-expanded --out "$OUT/train_125m.json"
