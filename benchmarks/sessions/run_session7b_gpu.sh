#!/usr/bin/env bash
# Session 7, third call: every kernel + layer GPU test with the reg pass as the default, its
# tile sweep (x pair, amax pass) and the 1b step with the NVFP4 passes side by side.
# Back: $OUT/session7b.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step "${TEST_SECS:-170}" gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_kernels_quant.py tests/test_linear.py
TAIL=40 step "${QUANT_SECS:-120}" quant.log python3 benchmarks/bench_quant.py \
  --only nvfp4/rowcol_rht@amax_given --passes rows,reg --shapes 16384x3072 --no-ref --sweep \
  --sweep-shapes 16384x3072 --sweep-only nvfp4/rowcol_rht@amax_given,nvfp4/col_rht
TAIL=10 step "${TRAIN1B_SECS:-290}" train_1b.log python3 benchmarks/bench_train.py --models 1b \
  --recipes bf16,nvfp4,nvfp4@nv-rows,nvfp4_no_sr --graph step --steps 8 --warmup 2 \
  --out "$OUT/train_1b.json"
pack_out session7b.tgz
