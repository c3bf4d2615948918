#!/usr/bin/env bash
# Session 31, call 6 (one H100/H200, ~6 minutes): the NVFP4 row kernel at its chosen tile
# (CONFIG["ROW1"]: [8, 8] blocks, 2 warps, 32 programs an SM; on for codes, opt-in for
# expanded views): GPU tests at that tile, issue 12's 1x16 figures at 8192² and 16384x4096,
# and the 125m nvfp4 step with the row kernel also taking the expanded row views, one process.
#     run: timeout 590 bash benchmarks/sessions/run_session31f_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=4 step 90 tests.txt python3 -m pytest -q -m gpu tests/test_kernels_nvfp4_row.py
TAIL=30 step 80 quant_1x16.txt python3 benchmarks/bench_quant.py --only nvfp4/1x16 \
  --shapes 8192x8192,16384x4096 --no-ref
TAIL=8 step 170 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes bf16,nvfp4,nvfp4@row1,nvfp4
