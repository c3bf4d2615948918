#!/usr/bin/env bash
# Session 43, call 5 (one H200, ~9 minutes): NVFP4's round-to-nearest column view (the x
# pairs' RHT'd column view, REG_COL["RNE"]) with its tile loop software-pipelined or with
# PREFETCH, swept at 8192², the 125m and the 1b widths; 125m nvfp4 training with the
# pipelined loop against the default in one process; then the GPU tests owed since session 42
# (the expanded views, and the NVFP4 quantizer tests at today's defaults).
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session43e_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=40 step 110 sweep_col_rne.txt python3 benchmarks/bench_quant.py --no-ref --sweep \
  --sweep-only nvfp4/col_rht@,nvfp4/rowcol_x --sweep-with PREFETCH \
  --sweep-shapes 8192x8192,16384x768,16384x2048 --shapes 8192x8192 \
  --only nvfp4/col_rht@amax_given,nvfp4/rowcol_x
TAIL=12 step 190 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 3 \
  --steps 10 --models 125m --recipes bf16,nvfp4,nvfp4@nv-colrne-s2,nvfp4 \
  --out "$OUT/train_125m.json"
TAIL=14 step 230 tests_owed.txt python3 -m pytest -q -rfE -m gpu --tb=short --durations=5 \
  tests/test_kernels_quant.py tests/test_expand.py \
  -k "test_expand or rowcol_exact or sr_seeded or amax_pass_skips or unclamped"
