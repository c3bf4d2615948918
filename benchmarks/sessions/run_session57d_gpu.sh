#!/usr/bin/env bash
# Session 57, call 4 (one H200, ~9 minutes): the row kernel two tiles an iteration
# (CONFIG["ROW1"]["UNROLL2"], MICROSCALE_NVFP4_ROW1_UNROLL2): its GPU test, then the row
# kernel's rows of bench_quant with it off and on, alternated twice (8192² and 16384x4096,
# graph-replayed, amax given); then call 3's 1b A/B in the other order (this commit, then the
# one before the session's kernel changes, .base/src, carried).
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session57d_gpu.sh  (carry .base)
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=6 step 120 gpu_tests.txt python3 -m pytest -q -n 4 -m gpu -p no:cacheprovider \
  tests/test_kernels_nvfp4_row.py -k "unroll2 or default"
ONLY=nvfp4/1x16@amax_given,nvfp4/1x16_sr@amax_given,nvfp4/1x16_rht@amax_given
ONLY=$ONLY,nvfp4/row_exp@amax_given,nvfp4/row_exp_sr@amax_given
for i in 1 2; do
  for u in 0 1; do
    TAIL=14 step $((i == 1 ? 75 : 45)) "quant_u$u-$i.txt" env MICROSCALE_NVFP4_ROW1_UNROLL2=$u \
      python3 benchmarks/bench_quant.py --no-ref --shapes 8192x8192,16384x4096 --only "$ONLY"
  done
done
NEW=$PYTHONPATH
BASE=$PWD/.base/src:$PYTHONPATH
for side in new base; do      # call 3's 1b A/B, the other order
  if [ "$side" = base ]; then export PYTHONPATH=$BASE; else export PYTHONPATH=$NEW; fi
  TAIL=5 step 150 "train_1b_$side.txt" python3 benchmarks/bench_train.py --graph step \
    --warmup 2 --steps 5 --models 1b --batch 8 --seq 2048 --recipes bf16,nvfp4,bf16 \
    --out "$OUT/train_1b_$side.json"
done
export PYTHONPATH=$NEW
