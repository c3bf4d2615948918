#!/usr/bin/env bash
# Session 55, call 6 (one H200, ~1.5 minutes). The NVFP4 many kernel writing Wᵀ's scale bytes
# too (9d97abb): its GPU tests (W's and Wᵀ's bytes against the per-tensor kernels and the
# reference at the 125m/1b shapes) and its timing at the 125m and 1b weight sets.
#     run (carry [".whl"]): OUT=$OUT timeout 150 bash benchmarks/sessions/run_session55g_gpu.sh
# (Call 7, refused for lack of device time: the same on ebaf087, whose 16 MB bound sends the
# 1b weight set to the per-weight copies of Wᵀ's scales; run it first next session.)
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=4 step 70 gpu_tests.txt python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_weight_cache.py
TAIL=8 step 70 many.txt python3 benchmarks/bench_many.py --fmt nvfp4 --models 125m,1b
