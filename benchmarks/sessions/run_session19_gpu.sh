#!/usr/bin/env bash
# Session 19, call 1 (one H100): E2M1 values rounded in floating point for the expanded views
# (kernels/_e2m1.py: no code formed and decoded; bf16 pairs as the fp32 words' top halves).
# GPU tests (the new value/code test compiled; the expanded views, the weight views and the
# grouped GEMM guard of session 18's unrun mends), then quantize pairs and the 125m step,
# each against session 18's code (.base/src = git archive f617bc7, carried) in its own process.
#     run: timeout 590 bash benchmarks/sessions/run_session19_gpu.sh      (carry: .whl, .base)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s19; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
BASE="env PYTHONPATH=$PWD/.base/src:/tmp/site"
pack() { tar czf "$REAL_OUT/session19.tgz" -C "$OUT" .; }
TAIL=8 step 170 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_e2m1_values.py tests/test_expand.py tests/test_weight_view.py \
  tests/test_grouped_weight_view.py tests/test_gemm_grouped.py tests/test_gemm_alpha.py
pack
Q="benchmarks/bench_quant.py --only nvfp4/rowcol_x,nvfp4/rowcol_dy,mxfp4/rowcol_x,mxfp4/rowcol_dy
   --shapes 16384x768,16384x2048,16384x8192 --passes reg,split --no-ref"
TAIL=4 step 90 quant_new.log python3 $Q
TAIL=4 step 90 quant_base.log $BASE python3 $Q
pack
T="benchmarks/bench_train.py --models 125m --graph step --recipes bf16,nvfp4,nvfp4_no_sr,mxfp4
   --steps 8 --warmup 2"
TAIL=8 step 110 train_125m_new.log python3 $T --out "$OUT/train_125m_new.json"
TAIL=8 step 110 train_125m_base.log $BASE python3 $T --out "$OUT/train_125m_base.json"
pack
