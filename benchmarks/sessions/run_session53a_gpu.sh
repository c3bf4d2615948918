#!/usr/bin/env bash
# Session 53, call 1 (prepared in session 52, not yet run; one H200, ~7 minutes): calibrate
# benchmarks/bench_block.py (one block's or MLP's forward + backward per kernel set, CUDA
# graphs replayed in turn) against what 1b training showed in session 52: REG_COL["RNE"] at
# 6 programs (the default) against 4 (@nv-colrne-p4; 1b +0.0 to +0.7%, 125m +0.6%), and the
# SR column views at [256, 32] (@nv-cols52; 5% faster alone, 0.8 ms a 1b step slower), and
# session 51's amax pass at 4 programs (@nv-amax-p4; 3-6% faster alone, 1b 0.8806x against
# 0.8864x). If the block bench ranks them as training did, tile and launch A/Bs can run there
# (seconds a row) instead of in whole steps.
#     run (carry [".whl"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session53a_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
R=bf16,nvfp4,nvfp4@nv-colrne-p4,nvfp4@nv-cols52
TAIL=10 step 220 block_1b_mlp.txt python3 benchmarks/bench_block.py --model 1b --part mlp \
  --recipes $R,nvfp4@nv-amax-p4 --repeat 7
TAIL=9 step 200 block_1b.txt python3 benchmarks/bench_block.py --model 1b --part block \
  --recipes $R --repeat 5
TAIL=8 step 150 block_125m_mlp.txt python3 benchmarks/bench_block.py --model 125m --part mlp \
  --recipes bf16,nvfp4,nvfp4@nv-colrne-p4 --repeat 7
