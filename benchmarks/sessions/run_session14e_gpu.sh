#!/usr/bin/env bash
# Session 14, call 5 (one H100 or H200): MXFP4's RHT 32 back on IEEE FMAs where it stays in
# the older column path (call 4: the exact ±1/8 sum on bf16 tensor cores made the 125m mxfp4
# step 3.9x slower), and the new MXFP4 column view with a 32-row block in one thread
# (quant_mx_col, CONFIG['COL_REG'], on by default; `@mx-col-old` is the older path). GPU
# tests, then bf16 + mxfp4 (+ mxfp4@mx-col-old) at 125m and at 1b.
#     run: timeout 400 bash benchmarks/sessions/run_session14e_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s14e; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session14e.tgz" -C "$OUT" .; }
TAIL=8 step 80 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_kernels_quant.py tests/test_expand.py -k "mx or rht"
pack
TAIL=12 step 120 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --recipes bf16,mxfp4,mxfp4@mx-col-old --steps 12 --warmup 3 --out "$OUT/train_125m.json"
pack
TAIL=12 step 150 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --recipes bf16,mxfp4 --steps 10 --warmup 3 --out "$OUT/train_1b.json"
pack
