#!/usr/bin/env bash
# Session 16, call 5 (one H100 or H200): nvfp4_no_sr's dy pair per width on the reg pass
# (+ decode) and the rows pass; the grouped GPU tests and the moe-1b nvfp4 step after the
# triton_available fix.
#     run: timeout 560 bash benchmarks/sessions/run_session16e_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s16e; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session16e.tgz" -C "$OUT" .; }
TAIL=40 step 150 quant_dy_nosr.log python3 benchmarks/bench_quant.py --no-ref \
  --only nvfp4/rowcol_dy_nosr --passes reg,rows \
  --shapes 16384x768,16384x2048,16384x2304,16384x3072,16384x6144,16384x8192
pack
TAIL=8 step 150 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_grouped_gpu.py
pack
TAIL=10 step 200 train_moe.log python3 benchmarks/bench_train.py --models moe-1b --batch 8 \
  --seq 2048 --graph step --recipes bf16,fp8_blockwise,nvfp4 --steps 6 --warmup 2 \
  --out "$OUT/train_moe.json"
pack
