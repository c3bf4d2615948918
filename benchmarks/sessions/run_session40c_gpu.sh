#!/usr/bin/env bash
# Session 40, call 3 (one H200, ~8 minutes): at the new ROW1 defaults (PREFETCH on, codes at
# [2, 32] blocks / 24 programs, expanded row views alone on the row kernel at [4, 8] / 32):
# a register cap (maxnreg) sweep, the GPU tests of the row kernel, the quantizers, expand and
# the fused MLP, issue 12's quantizer figures in two processes, and 125m nvfp4 against
# @row1-old in one process.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session40c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=40 step 100 sweep.txt python3 benchmarks/bench_quant.py --no-ref --sweep --sweep-with PREFETCH \
  --sweep-shapes 8192x8192 --shapes 8192x8192 --only nvfp4/1x16@amax_given
Q="nvfp4/1x16@amax_given,nvfp4/1x16_sr@amax_given,nvfp4/col_rht_sr@amax_given,nvfp4/rowcol_rne_rhtsr@amax_given,nvfp4/rowcol_dy,nvfp4/row_exp"
for i in 1 2; do
  TAIL=12 step 80 quant_$i.txt python3 benchmarks/bench_quant.py --no-ref \
    --shapes 8192x8192,16384x4096 --only "$Q"
done
TAIL=12 step 130 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 3 \
  --steps 10 --models 125m --recipes bf16,nvfp4,nvfp4@row1-old,nvfp4 --out "$OUT/train_125m.json"
TAIL=20 step 200 tests.txt python3 -m pytest -q -rfE -m gpu --tb=short tests/test_kernels_nvfp4_row.py \
  tests/test_expand.py tests/test_kernels_quant.py tests/test_mlp.py
