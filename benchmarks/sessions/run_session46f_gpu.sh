#!/usr/bin/env bash
# Session 46, call 6 (one H200, ~4 minutes): FP8 128x128 weights in one launch through the
# register tile (quant_many.fp8_w128_many_kernel): its GPU test against the per-tensor kernels
# and the reference, bench_many at the 125m and 1b weight sets (the old tile code beside it),
# and 125m fp8_blockwise with it and @many-tile, bf16 first and last.
#     run: OUT=$OUT timeout 250 bash benchmarks/sessions/run_session46f_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=4 step 60 gpu_tests.txt python3 -m pytest -q -m gpu tests/test_weight_cache.py \
  -k "gpu_many_kernel_matches_per_tensor" -p no:benchmark
TAIL=8 step 50 many.txt python3 benchmarks/bench_many.py --models 125m,1b
TAIL=8 step 120 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 125m --recipes bf16,fp8_blockwise,fp8_blockwise@many-tile,bf16 \
  --out "$OUT/train_125m.json"
