#!/usr/bin/env bash
# Session 36, call 1 (one H100/H200, ~9 minutes): SR without the slow conversion pipe
# (_e2m1._sr_sum / _grid_bits: the random offset from the byte's bits, the floor as PTX
# mul.rz): its GPU tests, then issue 12's SR figures with it and (a second process) with the
# previous _e2m1.py (.ab/_e2m1_before.py, carried: `git show 2008dc2:src/microscale/kernels/_e2m1.py`),
# then the row kernel's SR tiles again (they were tuned for the old instruction mix).
#     run: timeout 590 bash benchmarks/sessions/run_session36_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
E=src/microscale/kernels/_e2m1.py
Q="nvfp4/1x16@amax_given,nvfp4/1x16_sr@amax_given,nvfp4/col_rht_sr@amax_given,nvfp4/rowcol_rne_rhtsr@amax_given,nvfp4/rowcol_dy"
TAIL=8 step 200 tests.txt python3 -m pytest -q -m gpu tests/test_e2m1_values.py \
  tests/test_kernels_nvfp4_row.py "tests/test_kernels_quant.py::test_gpu_sr_seeded" \
  "tests/test_kernels_quant.py::test_gpu_nvfp4_reg_pass_matches" \
  tests/test_expand.py::test_gpu_expanded_views_match_reference
TAIL=40 step 90 quant_new.txt python3 benchmarks/bench_quant.py --no-ref \
  --shapes 8192x8192,16384x4096 --only "$Q"
if [ -f .ab/_e2m1_before.py ]; then
  cp "$E" /tmp/_e2m1_new.py && cp .ab/_e2m1_before.py "$E"
  TAIL=40 step 90 quant_before.txt python3 benchmarks/bench_quant.py --no-ref \
    --shapes 8192x8192,16384x4096 --only "$Q"
  cp /tmp/_e2m1_new.py "$E"
fi
TAIL=30 step 120 sweep_sr.txt python3 benchmarks/bench_quant.py --no-ref --quick --sweep \
  --only nvfp4/1x16_sr@amax_given --sweep-only nvfp4/1x16_sr@amax_given --sweep-with NAN_TILE
