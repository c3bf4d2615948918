#!/usr/bin/env bash
# Session 31, call 2-3 (one H100/H200, ~4 minutes): the Gluon kernel with a 256-wide B tile
# (four 64-column chains a K step, one [64, 64] chain tile, four fp32 totals: 128 + 32
# registers) with A from shared memory or from registers, against the 128-wide kernel,
# cuBLASLt and bf16; MXFP8 data and FP8 1x128 x 1x128 (the fp8_blockwise wgrad's scaling).
#     run: timeout 590 bash benchmarks/sessions/run_session31c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=6 step 200 tests_wgmma.txt python3 -m pytest -q -m gpu tests/test_kernels_mxfp8_wgmma.py -x
step 300 bench_n256.txt python3 benchmarks/bench_mxfp8_wgmma.py \
  --shapes 8192x8192x8192,16384x8192x8192 --data uniform,perchunk,gaussian
