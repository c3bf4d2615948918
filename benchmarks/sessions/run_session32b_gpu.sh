#!/usr/bin/env bash
# Session 32, call 2 (one H100/H200, ~8 minutes): the NVFP4 row kernel's switches
# (CONFIG["ROW1"]: NAN_TILE, U_BITS, STORE64; offline SASS fewer instructions a tile and no
# shared-memory regrouping of the stores): GPU tests with them on, the graph-replayed 1x16
# views and the SR dy pair per switch and tile at 8192², and the 125m nvfp4 step with the
# row kernel taking the split pairs' row launch, with and without STORE64, in one process.
#     run: timeout 590 bash benchmarks/sessions/run_session32b_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=6 step 130 tests.txt python3 -m pytest -q -m gpu tests/test_kernels_nvfp4_row.py
TAIL=40 step 200 quant_row1.txt python3 benchmarks/bench_quant.py --only nvfp4/1x16 \
  --shapes 8192x8192 --no-ref --sweep --sweep-shapes 8192x8192 --sweep-with NAN_TILE \
  --sweep-only nvfp4/1x16@amax_given,nvfp4/1x16_sr@amax_given,nvfp4/rowcol_dy
TAIL=10 step 200 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes bf16,nvfp4,nvfp4@row1,nvfp4@row1-s64,nvfp4
