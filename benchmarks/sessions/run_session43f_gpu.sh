#!/usr/bin/env bash
# Session 43, call 6 (one H200, ~4 minutes): NVFP4's round-to-nearest column view on its new
# tile (REG_COL["RNE"]: [128, 32], 2 warps, 4 programs, PREFETCH) as the default: its GPU
# tests (the view alone with and without the RHT, a split x pair, the expanded views, the pair
# test over every format), then the view timed at 8192² and 16384x768.
#     run: OUT=$OUT timeout 400 bash benchmarks/sessions/run_session43f_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step 200 tests_col_rne.txt python3 -m pytest -q -rfE -m gpu --tb=short --durations=5 \
  tests/test_kernels_quant.py tests/test_expand.py \
  -k "rne_column_view_exact or (rowcol_exact and bf16) or (expanded_views_match_reference and nvfp4_x)"
TAIL=16 step 100 quant_col_rne.txt python3 benchmarks/bench_quant.py --no-ref \
  --shapes 8192x8192,16384x768 --only nvfp4/col_rht@amax_given,nvfp4/rowcol_x
