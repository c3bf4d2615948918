#!/usr/bin/env bash
# Session 40, call 2 (one H200, ~8 minutes): the row kernel's PREFETCH tiles around call 1's best
# (codes RNE and SR, the lone expanded row views, the SR dy pair; 8192², amax given), then the
# training step with expanded row views on the row kernel (@row1-exp, @row1-exp-pf) against
# the reg pass, one process each at 125m and 1b.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session40b_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=75 step 170 sweep.txt python3 benchmarks/bench_quant.py --no-ref --sweep --sweep-with PREFETCH \
  --sweep-shapes 8192x8192 --shapes 8192x8192 --only nvfp4/1x16@amax_given
TAIL=14 step 100 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 3 \
  --steps 10 --models 125m --recipes bf16,nvfp4,nvfp4@row1-exp-pf,nvfp4@row1-exp,nvfp4 \
  --out "$OUT/train_125m.json"
TAIL=14 step 300 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,nvfp4@row1-exp-pf,nvfp4@row1-exp,nvfp4 --out "$OUT/train_1b.json"
