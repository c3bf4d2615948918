#!/usr/bin/env bash
# Session 21, call 3 (one H100): a row view alone loads two raw tiles at a time (fewer
# registers): sweep its launch (quant_nvfp4.CONFIG['REG_ROW']) at 8192², each config checked
# bit for bit; the column view alone on its own tile (REG_COL); then 125m nvfp4 against
# session 20's code (01abe68, carried as .base/src) in a process of its own.
#     run: timeout 590 bash benchmarks/sessions/run_session21c_gpu.sh      (carry: .whl, .base)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s21c; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session21c.tgz" -C "$OUT" .; }
TAIL=30 step 230 quant_sweep.log python3 benchmarks/bench_quant.py --no-ref --shapes 8192x8192 \
  --only nvfp4/1x16,nvfp4/col_rht,nvfp4/rowcol_rne_rhtsr,nvfp4/rowcol_dy,nvfp4/rowcol_x \
  --sweep --sweep-shapes 8192x8192 --sweep-only nvfp4/1x16@,nvfp4/1x16_sr@,nvfp4/rowcol_dy
pack
T="benchmarks/bench_train.py --graph step --warmup 2 --steps 8 --models 125m"
TAIL=8 step 150 train_125m_new.log python3 $T --recipes bf16,nvfp4,nvfp4_no_sr \
  --out "$OUT/train_125m_new.json"
pack
TAIL=8 step 150 train_125m_base.log env PYTHONPATH=$PWD/.base/src:/tmp/site python3 $T \
  --recipes bf16,nvfp4 --out "$OUT/train_125m_base.json"
pack
