#!/usr/bin/env bash
# Session 21, call 2 (one H100): issue 12's NVFP4 quantizer targets again (RNE rows + RHT/SR
# columns now split), and a sweep of the tile of reg-pass launches with one view
# (quant_nvfp4.CONFIG['REG_ALONE']) at 8192², each config checked bit for bit.
#     run: timeout 590 bash benchmarks/sessions/run_session21b_gpu.sh      (carry: .whl)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s21b; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session21b.tgz" -C "$OUT" .; }
V=nvfp4/1x16,nvfp4/col_rht,nvfp4/rowcol_rne_rhtsr,nvfp4/rowcol_dy
TAIL=30 step 150 quant_targets.log python3 benchmarks/bench_quant.py --no-ref \
  --shapes 8192x8192,16384x4096 --only $V
pack
TAIL=45 step 380 quant_sweep.log python3 benchmarks/bench_quant.py --no-ref --shapes 1024x1024 \
  --only nvfp4/1x16@ --sweep --sweep-shapes 8192x8192 \
  --sweep-only nvfp4/1x16@,nvfp4/1x16_sr@,nvfp4/col_rht@,nvfp4/col_rht_sr@,nvfp4/rowcol_dy
pack
