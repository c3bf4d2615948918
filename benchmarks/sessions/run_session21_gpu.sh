#!/usr/bin/env bash
# Session 21, call 1 (one H100): issue 12's quantizer targets at its shapes (8192², 16384x4096,
# counting x once; with the amax pass and with the amax given), a reg-pass tile sweep at 8192²,
# ms.Linear at 16384 tok 4096->14336, the MoE op-level figures, and the grouped GPU test
# session 20 did not reach.
#     run: timeout 590 bash benchmarks/sessions/run_session21_gpu.sh      (carry: .whl)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s21; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session21.tgz" -C "$OUT" .; }
TAIL=6 step 70 gpu_tests_grouped.log python3 -m pytest -q -x -p no:cacheprovider \
  "tests/test_grouped_nvfp4_reg.py" -k "expanded_views_equal_the_reference"
pack
V=nvfp4/1x16,nvfp4/col_rht,nvfp4/rowcol_rne_rhtsr,nvfp4/rowcol_x,nvfp4/rowcol_dy
TAIL=24 step 170 quant_targets.log python3 benchmarks/bench_quant.py --no-ref \
  --shapes 8192x8192,16384x4096 --only $V --sweep --sweep-shapes 8192x8192 \
  --sweep-only nvfp4/1x16@,nvfp4/col_rht@,nvfp4/rowcol_rne_rhtsr@
pack
TAIL=16 step 130 bench_linear.log python3 benchmarks/bench_linear.py \
  --recipes nvfp4,nvfp4_no_sr,mxfp8,fp8_blockwise,fp8_tensorwise
pack
TAIL=30 step 150 moe_ops.log python3 benchmarks/bench_moe.py --no-train --graph \
  --recipes fp8_blockwise,mxfp8,nvfp4
pack
