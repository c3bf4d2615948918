#!/usr/bin/env bash
# Session 27, call 1 (one H100): what session 26 left untested on a GPU, then issue 12's figures.
# 1. the fixed atomic-amax path (nvfp4_amax_of's if/else, caee965): the reg pass at training
#    shapes against the reference and the rows pass, the amax pass with NaN, the single-view
#    cases of a row view with the RHT; the many-tensor weight kernels (quant_many.table_tile);
# 2. issue 12's quantizer targets (bench_quant, graph-replayed) and ms.Linear at 16384 tok,
#    4096 -> 14336 (bench_linear), not re-measured since session 21.
#     run: timeout 590 bash benchmarks/sessions/run_session27a_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s27a; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session27a.tgz" -C "$OUT" .; }
TAIL=14 step 260 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider -rA \
  tests/test_kernels_quant.py tests/test_weight_cache.py \
  -k "nvfp4_reg_pass_matches or amax_pass_skips or (quantize_exact and opts1) or many_kernel"
pack
TAIL=40 step 150 quant_targets.log python3 benchmarks/bench_quant.py --no-ref \
  --shapes 8192x8192,16384x4096 \
  --only nvfp4/1x16,nvfp4/col_rht,nvfp4/rowcol_rne_rhtsr,nvfp4/rowcol_dy
pack
TAIL=14 step 120 bench_linear.log python3 benchmarks/bench_linear.py \
  --recipes nvfp4,nvfp4_no_sr,mxfp8,fp8_blockwise,fp8_tensorwise
pack
