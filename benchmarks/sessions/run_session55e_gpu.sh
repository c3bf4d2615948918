#!/usr/bin/env bash
# Session 55, call 4 (one H200, ~6 minutes). The aligned NVFP4 many-weight kernels' configs
# (bench_many --sweep: programs an SM, warps) at the 125m and 1b weight sets, then 125m nvfp4
# per layer (the default) against @nv-group (every NVFP4 weight in two launches a step: small
# weights, launch-bound one by one), alternated, and nvfp4_no_sr.
#     run (carry [".whl"]): OUT=$OUT timeout 480 bash benchmarks/sessions/run_session55e_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=14 step 150 many_sweep.txt python3 benchmarks/bench_many.py --fmt nvfp4 \
  --models 125m,1b --sweep
TAIL=3 step 300 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --models 125m --recipes bf16,nvfp4,nvfp4@nv-group,nvfp4,nvfp4@nv-group,nvfp4_no_sr,bf16 \
  --out "$OUT/train_125m.json"
grep -hE '^(model|-----|125m )' "$OUT/train_125m.txt"
