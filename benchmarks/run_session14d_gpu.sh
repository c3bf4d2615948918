#!/usr/bin/env bash
# Session 14, call 4 (one H100 or H200): MXFP4's 32-point RHT as an exact ±1/8 sum on tensor
# cores times fp32(sqrt 2) (it was 32 FMAs an element). Its GPU tests, the 125m step (mxfp4
# with the kernel's default tile and two others, nvfp4, bf16), then the MX kernel's tile sweep
# on the mxfp4 recipe's pairs.
#     run: timeout 590 bash benchmarks/run_session14d_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s14d; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session14d.tgz" -C "$OUT" .; }
TAIL=15 step 110 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_kernels_quant.py tests/test_expand.py -k "mx or rht"
pack
TAIL=30 step 200 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --recipes bf16,mxfp4,mxfp4@mx-8w,mxfp4@mx-64x64,nvfp4 --steps 12 --warmup 3 \
  --out "$OUT/train_125m.json"
pack
TAIL=60 step 240 quant_mxfp4.log python3 benchmarks/bench_quant.py --only mxfp4/rowcol \
  --shapes 16384x3072 --no-ref --sweep --sweep-shapes 16384x3072,16384x768 \
  --sweep-only mxfp4/rowcol
pack
