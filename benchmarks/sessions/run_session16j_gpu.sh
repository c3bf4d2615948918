#!/usr/bin/env bash
# Session 16, call 11 (one H100 or H200): nvfp4's SR dy pairs as two reg-pass launches
# (SPLIT) against the rows pass, per width at 16384 rows, then in 1b steps at every width
# (`@nv-split`) and only above 4096 columns (`@nv-split-wide`: 1b's 6144/8192-wide dy).
#     run: timeout 420 bash benchmarks/sessions/run_session16j_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s16j; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session16j.tgz" -C "$OUT" .; }
TAIL=30 step 110 quant_dy_split.log python3 benchmarks/bench_quant.py --no-ref \
  --only nvfp4/rowcol_dy --passes rows,split \
  --shapes 16384x768,16384x2048,16384x3072,16384x6144,16384x8192
pack
TAIL=10 step 280 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --recipes bf16,nvfp4,nvfp4@nv-split,nvfp4@nv-split-wide --steps 8 --warmup 2 \
  --out "$OUT/train_1b.json"
pack
