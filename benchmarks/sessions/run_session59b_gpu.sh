#!/usr/bin/env bash
# Session 59, call 2 (one H200, ~9 minutes): the reg pass's bf16 RHT column views clamped on
# the raw words and rounded / maximized on bf16 pairs (_rht.clamp_bf16_chunk, rotated_blocks in
# quant_nvfp4_reg_views.col_tile). GPU tests (the new clamp-visible test, the column views'
# exactness and unclamped tests, the relu² MLP's nvfp4 bits, and the α GEMM's narrow-tile tests
# that call 1 did not reach); the column views before (.base/i/src: the session's start) and
# after, alternated twice (graph-replayed, amax given); then the programs an SM that the new
# register counts allow (bench_quant --sweep-with PROGS_PER_SM+maxnreg+PREFETCH).
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session59b_gpu.sh  (carry .base)
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
K="see_the_rht_clamp or reg_pass_e2m1_codes_exact or col_view_unclamped or tma_and_pointer"
K="$K or du_in_dgrad or (cuda_with_the_kernels and nvfp4)"
TAIL=6 step 200 gpu_tests.txt python3 -m pytest -q -n 6 -m gpu -rf -p no:cacheprovider \
  tests/test_kernels_quant.py tests/test_gemm_alpha.py tests/test_mlp.py \
  -k "$K"
ONLY=nvfp4/col_rht@amax_given,nvfp4/col_rht_sr@amax_given,nvfp4/col_relu2_exp@amax_given
ONLY=$ONLY,nvfp4/col_rht_sr_exp@amax_given,nvfp4/rowcol_rne_rhtsr@amax_given
for i in 1 2; do
  for side in base new; do
    if [ "$side" = base ]; then src=.base/i/src; else src=src; fi
    TAIL=12 step $((i == 1 ? 90 : 60)) "quant_$side-$i.txt" env PYTHONPATH="$PWD/$src:$PYTHONPATH" \
      python3 benchmarks/bench_quant.py --no-ref --shapes 8192x8192,16384x4096,16384x8192 \
      --only "$ONLY"
  done
done
TAIL=30 step 120 sweep.txt python3 benchmarks/bench_quant.py --no-ref --sweep \
  --sweep-with PROGS_PER_SM+maxnreg+PREFETCH --sweep-shapes 8192x8192,16384x8192 \
  --shapes 8192x8192 --only nvfp4/col_rht@amax_given
