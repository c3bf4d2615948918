#!/usr/bin/env bash
# Session 29, call 3 (one H100/H200, ~6 minutes): profile before the next lever.
# 1. one profiled step each of 125m mxfp8 / nvfp4 and 1b nvfp4 / mxfp8 (bench_train.py
#    --profile: busy ms by kind, top kernels, microscale ops by shape);
# 2. the NVFP4 x pair with and without a given amax at the MLP's widths (the difference is
#    the amax pass), to decide whether an amax taken in a GEMM epilogue can pay.
#     run: timeout 590 bash benchmarks/sessions/run_session29b_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s29b; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session29b.tgz" -C "$OUT" .; }
TAIL=14 step 170 train_125m_profile.log python3 benchmarks/bench_train.py --graph step \
  --warmup 2 --steps 6 --models 125m --recipes bf16,mxfp8,nvfp4 --profile bf16,mxfp8,nvfp4 \
  --out "$OUT/train_125m_profile.json"
pack
TAIL=12 step 200 train_1b_profile.log python3 benchmarks/bench_train.py --graph step \
  --warmup 2 --steps 4 --models 1b --batch 8 --seq 2048 --recipes bf16,nvfp4,mxfp8 \
  --profile bf16,nvfp4,mxfp8 --out "$OUT/train_1b_profile.json"
pack
TAIL=30 step 120 quant_amax.log python3 benchmarks/bench_quant.py --no-ref \
  --shapes 16384x768,16384x3072,16384x8192 --only nvfp4/rowcol_rht,nvfp4/col_rht_sr,nvfp4/1x16
pack
