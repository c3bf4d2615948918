#!/usr/bin/env bash
# Session 41, call 1 (one H200, ~8 minutes): the NVFP4 row kernel's PACK bits (wide-multiply
# Philox, code words packed from the grid bits) A/B in one process and the SR tiles at 118
# registers (8192², amax given); the GPU tests of the row kernel and the E2M1 helpers at the
# new default; the reg pass's column view with PREFETCH (session 40, offline only until now);
# the seven quantizer GPU tests session 40's step limit cut.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session41a_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=40 step 150 sweep_pack.txt python3 benchmarks/bench_quant.py --no-ref --sweep --sweep-with PACK \
  --sweep-shapes 8192x8192 --shapes 8192x8192,16384x4096 \
  --only nvfp4/1x16@amax_given,nvfp4/1x16_sr@amax_given,nvfp4/1x16_rht@amax_given,nvfp4/rowcol_rne_rhtsr@amax_given
TAIL=25 step 150 tests_row.txt python3 -m pytest -q -rfE -m gpu --tb=short --durations=5 \
  tests/test_kernels_nvfp4_row.py tests/test_e2m1_values.py
TAIL=30 step 110 sweep_colpf.txt python3 benchmarks/bench_quant.py --no-ref --sweep --sweep-with PREFETCH \
  --sweep-shapes 8192x8192 --sweep-only nvfp4/col_rht_sr@amax_given,nvfp4/rowcol_dy \
  --shapes 8192x8192 --only nvfp4/col_rht_sr@amax_given
TAIL=25 step 120 tests_quant.txt python3 -m pytest -q -rfE -m gpu --tb=short --durations=5 \
  tests/test_kernels_quant.py -k "nvfp4_reg_pass_matches or amax_pass_skips_nan or sr_seeded or unclamped"
