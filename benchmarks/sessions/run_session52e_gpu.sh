#!/usr/bin/env bash
# Session 52, call 5 (one H200, ~7 minutes; the session's last device time). REG_COL["RNE"]
# at 6 programs an SM is the default now (calls 2-4: its views 1-11% faster alone, 1b nvfp4
# level to +0.1%); here 125m nvfp4 against the old 4 programs (nv-colrne-p4), twice each,
# alternated, then 1b once more, bf16 first and last in each process.
#     run (carry [".whl"]): OUT=$OUT timeout 440 bash benchmarks/sessions/run_session52e_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=9 step 200 train_125m.txt python3 benchmarks/bench_train.py --graph step --models 125m \
  --recipes bf16,nvfp4,nvfp4@nv-colrne-p4,nvfp4,nvfp4@nv-colrne-p4,bf16 \
  --out "$OUT/train_125m.json"
TAIL=7 step 220 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,nvfp4@nv-colrne-p4,bf16 --out "$OUT/train_1b.json"
