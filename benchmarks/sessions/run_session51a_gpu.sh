#!/usr/bin/env bash
# Session 51, call 1 (prepared in session 50, not yet run; one H200, ~7 minutes): issue 11's
# 1b nvfp4 0.9x needs ~2.6 ms of its ~194 ms step (session 50: 0.886x). The NVFP4 amax pass
# took 7.0 ms of it in session 47's profile, reading at an estimated ~55% of the copy rate, under a
# launch tuned on the H100 (3 programs an SM, session 18). First the pass alone under each of
# bench_amax_pass.py's launch configs at the zoo's shapes (same amaxes checked), then 1b nvfp4
# with three of them in one process, bf16 first and last.
#     run (carry [".whl"]): OUT=$OUT timeout 560 bash benchmarks/sessions/run_session51a_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=50 step 120 amax_pass.txt python3 benchmarks/bench_amax_pass.py
TAIL=10 step 420 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,nvfp4@nv-amax-p4,nvfp4@nv-amax-p4r,nvfp4@nv-amax-w8,bf16 \
  --out "$OUT/train_1b.json"
