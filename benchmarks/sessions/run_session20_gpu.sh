#!/usr/bin/env bash
# Session 20, call 1 (one H100): the NVFP4 amax pass with fewer instructions (the GPU's max drops
# NaN without a select, NaN-propagating min/max for the RHT clamp, the rotated maximum rounded
# once: 22.2 -> 13.8 SASS an element offline) and walking its tiles backwards (REG_AMAX
# REVERSE). GPU tests of the quantizers, then quantize pairs and the tile sweep, each against
# session 19's code (.base/src = git archive 84e8417, carried) in its own process, and the
# 125m nvfp4 step (new, new with the forward amax order, base).
#     run: timeout 590 bash benchmarks/sessions/run_session20_gpu.sh      (carry: .whl, .base)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s20; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
BASE="env PYTHONPATH=$PWD/.base/src:/tmp/site"
pack() { tar czf "$REAL_OUT/session20.tgz" -C "$OUT" .; }
TAIL=8 step 150 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_kernels_quant.py tests/test_grouped_nvfp4_reg.py
pack
Q="benchmarks/bench_quant.py --only nvfp4/rowcol_x,nvfp4/rowcol_dy,nvfp4/col_rht,nvfp4/rowcol_rht
   --shapes 16384x768,16384x2048,16384x8192 --no-ref"
TAIL=4 step 80 quant_new.log python3 $Q
TAIL=4 step 80 quant_base.log $BASE python3 $Q
pack
TAIL=30 step 100 quant_sweep.log python3 benchmarks/bench_quant.py --sweep --no-ref \
  --only none --sweep-only nvfp4/col_rht,nvfp4/rowcol_x --sweep-shapes 16384x2048,16384x8192
pack
T="benchmarks/bench_train.py --models 125m --graph step --steps 8 --warmup 2"
TAIL=8 step 110 train_125m_new.log python3 $T --recipes bf16,nvfp4,nvfp4@nv-amax-fwd \
  --out "$OUT/train_125m_new.json"
TAIL=8 step 70 train_125m_base.log $BASE python3 $T --recipes bf16,nvfp4 \
  --out "$OUT/train_125m_base.json"
pack
