#!/usr/bin/env bash
# Session 55, call 2 (prepared in session 54, not yet run; one H200, ~5 minutes). Why NVFP4's
# grouped weights (@nv-group: two launches a step instead of two a weight) ran the 1b step
# 1.5-2% slower in session 54's call 2 although its launches should be faster: replay
# profiles of nvfp4 and nvfp4@nv-group with their launch sequences; compare them with
#     python tools/seq_layer.py <call>/train_1b.seq.json 8 --by-name
#     run (carry [".whl"]): OUT=$OUT timeout 400 bash benchmarks/sessions/run_session55b_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=3 step 380 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 --recipes bf16 \
  --profile nvfp4,nvfp4@nv-group --out "$OUT/train_1b.json"
