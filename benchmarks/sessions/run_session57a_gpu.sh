#!/usr/bin/env bash
# Session 57, call 1 (one H200, ~9 minutes): the persistent quantizers' tile division by a
# hoisted high multiply, E4M3 scale bytes decoded by the hardware, NVFP4 RNE codes rounded in
# the 2^-126-scaled domain and shifted straight to their nibbles. GPU tests of every kernel
# that changed, then issue 12's item-1 rows and training's NVFP4 views, the commit before
# (.base/src, `git archive` of it, carried) and this one alternated, each process measuring
# its own copy rate.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session57a_gpu.sh  (carry .base)
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
NEW=$PYTHONPATH
BASE=$PWD/.base/src:$PYTHONPATH
TAIL=25 step 230 gpu_tests.txt python3 -m pytest -q -x -n 8 -m gpu -p no:cacheprovider \
  tests/test_e2m1_values.py tests/test_kernels_nvfp4_row.py tests/test_kernels_quant.py \
  tests/test_grouped_nvfp4_reg.py
ONLY=nvfp4/1x16@amax_given,nvfp4/1x16_sr@amax_given,nvfp4/1x16_rht@amax_given
ONLY=$ONLY,nvfp4/col_rht@amax_given,nvfp4/rowcol_rne_rhtsr@amax_given,nvfp4/row_exp@amax_given
ONLY=$ONLY,nvfp4/row_exp_sr@amax_given,nvfp4/col_relu2_exp@amax_given
ONLY=$ONLY,nvfp4/col_rht_sr_exp@amax_given,fp8_block/1x128_rowcol,mxfp8_e4m3/rowcol
for i in 1 2; do
  for side in base new; do
    if [ $side = base ]; then export PYTHONPATH=$BASE; else export PYTHONPATH=$NEW; fi
    TAIL=30 step $((i == 1 ? 100 : 60)) quant_${side}$i.txt python3 benchmarks/bench_quant.py \
      --no-ref --shapes 8192x8192,16384x4096 --only "$ONLY"
  done
done
export PYTHONPATH=$NEW
