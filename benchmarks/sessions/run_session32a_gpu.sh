#!/usr/bin/env bash
# Next session, call 1 (one H100/H200, ~9 minutes): the NVFP4 reg pass with its E2M1 codes made
# from the rounded value (quant_nvfp4.CONFIG["FAST_E2M1"], off; offline SASS 8-18% fewer
# instructions in the views written as codes, session 31): GPU bits, the graph-replayed pairs
# on and off, and the 125m and 1b nvfp4 steps on and off in one process each.
#     run: timeout 590 bash benchmarks/sessions/run_session32a_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=4 step 100 tests.txt python3 -m pytest -q -m gpu tests/test_kernels_quant.py -k nvfp4
for fast in 0 1; do
  MICROSCALE_NVFP4_FAST_E2M1=$fast TAIL=14 step 60 "quant_fast$fast.txt" \
    python3 benchmarks/bench_quant.py --only nvfp4/rowcol_x,nvfp4/rowcol_dy,nvfp4/col_rht \
    --shapes 16384x2048,16384x8192 --no-ref
done
TAIL=8 step 150 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes bf16,nvfp4,nvfp4@fast-e2m1,nvfp4
TAIL=8 step 240 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 --recipes bf16,nvfp4,nvfp4@fast-e2m1,nvfp4
