#!/usr/bin/env bash
# Session 27, call 4 (one H100, the budget's last ~480 s): 1b nvfp4 and mxfp8 against "@s26"
# (DECODE_XT_OP and SHARE_COL_AMAX off) in one process, batch 8 x 2048.
#     run: timeout 400 bash benchmarks/sessions/run_session27d_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s27d; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session27d.tgz" -C "$OUT" .; }
TAIL=9 step 380 train_1b.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,mxfp8,mxfp8@s26,nvfp4,nvfp4@s26 --out "$OUT/train_1b.json"
pack
