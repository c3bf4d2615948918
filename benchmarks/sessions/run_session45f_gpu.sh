#!/usr/bin/env bash
# Session 45, call 7 (one H200, ~3 minutes): GPU tests of the paths the final code changes
# and was not yet tested through on the GPU: MXFP8 pairs with prologues (recompute, the fused
# relu² MLP) under EXPAND_XT "auto", and every MXFP8 register-kernel test (mx8_tile factored).
#     run: OUT=$OUT timeout 210 bash benchmarks/sessions/run_session45f_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=8 step 200 gpu_tests.txt python3 -m pytest -q -x -m gpu tests/test_recompute.py \
  tests/test_mlp.py tests/test_kernels_quant.py -k "mx or mxfp8 or recompute or same_bits"
