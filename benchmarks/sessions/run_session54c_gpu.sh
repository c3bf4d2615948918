#!/usr/bin/env bash
# Session 54, call 3 (one H200, ~6 minutes). Call 2's launch map of one 1b layer: the three x
# column views (x_attn, x_mlp, o_in) are kept as codes and decoded in backward (_dequant_kernel,
# ~25 us each, 76 us a layer); kept expanded instead (@xt-expanded: the pair splits, the column
# view written expanded in forward, no decode; +48 MB kept per x, ~+2.4 GB at 1b, still under
# issue 11's 0.9x memory bound). Session 39 read it 1% slower on older code; three alternations
# here, and a replay profile of it (launch sequence in train_1b.seq.json).
#     run (carry [".whl"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session54c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=14 step 570 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,nvfp4@xt-expanded,nvfp4,nvfp4@xt-expanded,nvfp4,nvfp4@xt-expanded,bf16 \
  --profile nvfp4@xt-expanded --out "$OUT/train_1b.json"
grep -E '^(model|-----|1b )' "$OUT/train_1b.txt"
