#!/usr/bin/env bash
# Session 47, call 2 (one H200, ~5 minutes): where a replayed step's time goes beside its
# kernels. bench_train's profile now records one replay of the captured step (--graph step)
# and the gaps between its kernels: 1b bf16, fp8_blockwise and nvfp4, 125m bf16 and
# fp8_blockwise (a graph step ran 6-9 ms longer than the eager profile's GPU busy at 1b).
#     run: OUT=$OUT timeout 560 bash benchmarks/sessions/run_session47b_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=6 step 300 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 4 --models 1b --batch 8 --seq 2048 --recipes bf16 \
  --profile bf16,fp8_blockwise,nvfp4 --out "$OUT/train_1b.json"
TAIL=6 step 200 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 4 --models 125m --recipes bf16 --profile bf16,fp8_blockwise \
  --out "$OUT/train_125m.json"
