#!/usr/bin/env bash
# Session 58, call 1 (one H200, ~7 minutes): the RHT'd row view's clamp, rounding and block
# maxima on bf16 pairs (_rht.clamp_bf16_words, round_bf16_blocks) and the rowwise path for
# one-K-block FP8 blockwise GEMMs (gemm_fp8._torch_rowwise): their GPU tests; the row kernel's
# RNE and RHT codes before (.base/h/src: the session's starting commit, carried) and after,
# alternated twice (8192² and 16384x4096, graph-replayed, amax given); the FP8 family's paths
# at the one-K-block shape 50m's k/v dgrad (16384x640x128) and its neighbours.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session58a_gpu.sh  (carry .base)
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=8 step 150 gpu_tests.txt python3 -m pytest -q -n 4 -m gpu -p no:cacheprovider \
  tests/test_kernels_nvfp4_row.py tests/test_kernels_gemm.py
TAIL=4 step 60 gpu_rowwise.txt python3 -m pytest -q -p no:cacheprovider \
  tests/test_kernels_gemm.py -k rowwise
ONLY=nvfp4/1x16@amax_given,nvfp4/1x16_rht@amax_given
NEW=$PYTHONPATH
BASE=$PWD/.base/h/src:$PYTHONPATH
for i in 1 2; do
  for side in base new; do
    if [ "$side" = base ]; then export PYTHONPATH=$BASE; else export PYTHONPATH=$NEW; fi
    TAIL=10 step $((i == 1 ? 75 : 50)) "quant_$side-$i.txt" python3 benchmarks/bench_quant.py \
      --no-ref --shapes 8192x8192,16384x4096 --only "$ONLY"
  done
done
export PYTHONPATH=$NEW
TAIL=30 step 120 sweep_fp8.txt python3 benchmarks/bench_gemm_sweep.py --families fp8 \
  --shapes 16384x640x128,8192x640x128,16384x128x640,16384x768x256 --out "$OUT/rules.json"
