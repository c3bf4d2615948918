#!/usr/bin/env bash
# Session 46, call 3 (one H200, ~7 minutes): the compiled-zoo recompute test as amended (the
# RMSNorm and embedding gradients, which Inductor fuses differently when recompute changes
# what the graph saves, compared within 1e-5 of their largest element, printed; the rest
# bit for bit), then a second process of 1b bf16 / nvfp4 / mxfp8 (call 2 read nvfp4 0.888x,
# session 44 0.922x: the spread between processes).
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session46c_gpu.sh  (carry .whl)
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=8 step 150 gpu_tests.txt python3 -m pytest -q -rA -n 3 -m gpu tests/test_recompute.py \
  -k "compiled_zoo" -p no:benchmark
TAIL=12 step 400 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 --recipes bf16,nvfp4,mxfp8,nvfp4,bf16 \
  --out "$OUT/train_1b.json"
