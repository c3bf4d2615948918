#!/usr/bin/env bash
# Session 53, call 3 (one H200, ~7 minutes). Call 2 calibrated bench_block.py against
# session 52's training A/Bs (it ranked all three as training did). Here: the unclamped
# column view (quant_nvfp4.CONFIG["COL_UNCLAMPED"], restored from d0c775a, off): its GPU test
# first (bit-identical to the clamped launch and the reference with 3e38 and Inf chunks),
# then block A/Bs of it, of the amax pass at 8 warps / 2 programs, and of two row-kernel tiles
# for the expanded row views, at the 1b MLP; then the 1b block with the unclamped view.
#     run (carry [".whl"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session53c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=3 step 200 gpu_test.txt python3 -m pytest -q -p no:benchmark -m gpu \
  tests/test_kernels_quant.py -k col_view_unclamped
TAIL=10 step 200 block_1b_mlp.txt python3 benchmarks/bench_block.py --model 1b --part mlp \
  --recipes bf16,nvfp4,nvfp4@nv-col-unclamped,nvfp4@nv-amax-w8,nvfp4@nv-row1-2x16,nvfp4@nv-row1-8x4 \
  --repeat 9
TAIL=7 step 150 block_1b.txt python3 benchmarks/bench_block.py --model 1b --part block \
  --recipes bf16,nvfp4,nvfp4@nv-col-unclamped --repeat 7
