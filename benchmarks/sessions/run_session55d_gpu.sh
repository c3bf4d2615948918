#!/usr/bin/env bash
# Session 55, call 3 (one H200, ~9 minutes). NVFP4's many-weight kernels aligned (session 55:
# inputs addressed from the first tensor's pointer so loads vectorize; the amax pass's atomics
# relaxed, one per program and tensor): their GPU tests, their 1b weight set against one launch
# pair per weight and the table-addressed kernels (bench_many), then 1b nvfp4 per layer (the
# default) against @nv-group (every NVFP4 weight in the two launches), alternated.
#     run (carry [".whl"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session55d_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=4 step 150 gpu_tests.txt python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_weight_cache.py
TAIL=8 step 80 many_1b.txt python3 benchmarks/bench_many.py --fmt nvfp4 --models 1b
TAIL=3 step 330 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,nvfp4@nv-group,nvfp4,nvfp4@nv-group,nvfp4,bf16 \
  --out "$OUT/train_1b.json"
grep -hE '^(model|-----|1b )' "$OUT/train_1b.txt"
