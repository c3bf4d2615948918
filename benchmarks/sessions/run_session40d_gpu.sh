#!/usr/bin/env bash
# Session 40, call 4 (one H200, ~7 minutes): RNE codes on the row kernel around the new tile
# (8192² and 16384x4096, amax given), then the GPU tests call 3's time limit cut: the row
# kernel, expand, the quantizers and the fused MLP at the new ROW1 defaults.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session40d_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=25 step 90 sweep.txt python3 benchmarks/bench_quant.py --no-ref --sweep --sweep-with PREFETCH \
  --sweep-shapes 8192x8192,16384x4096 --shapes 8192x8192 --only nvfp4/1x16@amax_given
TAIL=25 step 440 tests.txt python3 -m pytest -q -rfE -m gpu --tb=short --durations=8 \
  tests/test_kernels_nvfp4_row.py tests/test_expand.py tests/test_kernels_quant.py tests/test_mlp.py
