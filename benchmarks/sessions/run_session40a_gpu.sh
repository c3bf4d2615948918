#!/usr/bin/env bash
# Session 40, call 1 (one H200, ~5 minutes): the NVFP4 row kernel loading the next tile's words
# while it quantizes this one (CONFIG["ROW1"]["PREFETCH"]): the tile sweep with and without it
# (1x16 RNE and SR codes, amax given; the SR dy pair with its row launch expanded on the row
# kernel against the reg pass) at 8192² and 16384x4096, the row kernel's GPU tests, then
# issue 12's quantizer figures with PREFETCH off and on (one process each).
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session40a_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=70 step 200 sweep.txt python3 benchmarks/bench_quant.py --no-ref --sweep --sweep-with PREFETCH \
  --sweep-shapes 8192x8192,16384x4096 --shapes 8192x8192 --only nvfp4/1x16@amax_given
TAIL=15 step 150 tests.txt python3 -m pytest -q -m gpu tests/test_kernels_nvfp4_row.py
Q="nvfp4/1x16@amax_given,nvfp4/1x16_sr@amax_given,nvfp4/col_rht_sr@amax_given,nvfp4/rowcol_rne_rhtsr@amax_given,nvfp4/rowcol_dy"
for pf in 0 1; do
  MICROSCALE_NVFP4_ROW1_PREFETCH=$pf TAIL=20 step 90 quant_pf$pf.txt python3 benchmarks/bench_quant.py \
    --no-ref --shapes 8192x8192,16384x4096 --only "$Q"
done
