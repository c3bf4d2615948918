#!/usr/bin/env bash
# Session 58, call 10 (one H200, ~3 minutes): gemm_alpha's NARROW_TILE (128x128, 4 stages, 4
# warps where N leaves an eighth or more of the 256-wide tiles' columns empty): its GPU tests,
# 50m's 128-wide k/v fprop at both tiles (call 9 timed the 640-wide ones), then item 5's NVFP4
# half again on the path training takes (bench_alpha_mm --training, 50m and 125m, 8192 and
# 16384 tokens).
#     run: OUT=$OUT timeout 400 bash benchmarks/sessions/run_session58j_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=4 step 150 gpu_tests.txt python3 -m pytest -q -n 4 -m gpu -p no:cacheprovider \
  tests/test_gemm_alpha.py tests/test_mlp.py
TAIL=6 step 60 alpha_128.txt python3 benchmarks/bench_alpha_mm.py --models 50m-128 \
  --configs 2,11
for t in 8192 16384; do
  TAIL=4 step 70 "alpha_training_$t.txt" python3 benchmarks/bench_alpha_mm.py --training \
    --models 50m,125m --tokens $t
done
