#!/usr/bin/env bash
# Session 31, call 1 (one H100/H200, ~4 minutes): the Gluon MXFP8 kernel's GPU tests (owed:
# host-side edits after session 30's last GPU run), then what an MXFP8 route through
# cuBLASLt's blockwise FP8 GEMM needs to know (fp32 output on Hopper, 1x128 x 1x128 speed,
# the regroup's failing groups): benchmarks/bench_blockwise_mx.py.
#     run: timeout 590 bash benchmarks/sessions/run_session31b_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=15 step 240 tests_wgmma.txt python3 -m pytest -q -m gpu tests/test_kernels_mxfp8_wgmma.py -x
step 240 bench_blockwise_mx.txt python3 benchmarks/bench_blockwise_mx.py
