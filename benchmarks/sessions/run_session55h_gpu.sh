#!/usr/bin/env bash
# Session 55, call 7 (one H200, ~1.5 minutes). The NVFP4 many kernel writing Wᵀ's scale bytes
# while they fit L2, else copied per weight (ebaf087): GPU tests of both (W's and Wᵀ's bytes
# against the per-tensor kernels and the reference), timing at the 125m and 1b weight sets.
#     run (carry [".whl"]): OUT=$OUT timeout 150 bash benchmarks/sessions/run_session55h_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=4 step 70 gpu_tests.txt python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_weight_cache.py
TAIL=8 step 70 many.txt python3 benchmarks/bench_many.py --fmt nvfp4 --models 125m,1b
