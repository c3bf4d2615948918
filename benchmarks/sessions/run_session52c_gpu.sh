#!/usr/bin/env bash
# Session 52, call 3 (one H200, ~8 minutes). Call 2: alone, the relu² column view ran 11%
# faster at 6 programs an SM and du's SR column view 5% faster at [256, 32] / 3 programs, but
# 1b nvfp4 with the first moved only 0.8897x -> 0.8899x. Here: the SR column views around
# that tile at 16384x8192 and 16384x2048, REG_COL["RNE"] at 6 programs on the RNE code views
# (125m's), the x pair's one launch (REG) at 16384x2048; then 1b nvfp4 with both column
# tiles, twice each, alternated with the default, bf16 first and last.
#     run (carry [".whl"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session52c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
Q="python3 benchmarks/bench_quant.py --no-ref --shapes 16384x2048 --sweep"
TAIL=14 step 110 col_sr.txt $Q --only nvfp4/col_rht_sr_exp@amax_given \
  --sweep-only nvfp4/col_rht_sr_exp@amax_given --sweep-shapes 16384x8192,16384x2048
TAIL=14 step 70 col_rne.txt $Q --only nvfp4/col_rht@amax_given \
  --sweep-only nvfp4/col_rht@amax_given --sweep-with PROGS_PER_SM+PREFETCH \
  --sweep-shapes 16384x768,16384x2048
TAIL=12 step 90 x_pair.txt $Q --only nvfp4/rowcol_x --sweep-only nvfp4/rowcol_x \
  --sweep-with NI+BC+num_warps+PROGS_PER_SM+maxnreg --sweep-shapes 16384x2048
TAIL=12 step 300 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,nvfp4@nv-cols52,nvfp4,nvfp4@nv-cols52,bf16 \
  --out "$OUT/train_1b.json"
