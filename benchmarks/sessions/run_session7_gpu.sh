#!/usr/bin/env bash
# Session 7, first call: the NVFP4 "reg" quantize pass (kernels/quant_nvfp4_reg.py) on the GPU:
# kernel + layer GPU tests, quantizer times against the rows pass with a tile sweep, and the
# 125m step with both passes side by side. Back: $OUT/session7.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step "${TEST_SECS:-100}" gpu_tests.log python3 -m pytest -q -m gpu -x -p no:cacheprovider \
  tests/test_kernels_quant.py tests/test_linear.py
TAIL=60 step "${QUANT_SECS:-180}" quant.log python3 benchmarks/bench_quant.py --only nvfp4/rowcol,nvfp4/col_rht,nvfp4/1x16 \
  --passes rows,reg-sr,reg --shapes 16384x768,16384x3072 --no-ref --sweep --sweep-shapes 16384x3072 \
  --sweep-only nvfp4/rowcol_rht_sr@amax_given,nvfp4/rowcol_rht@amax_given,nvfp4/col_rht
TAIL=14 step "${TRAIN_SECS:-270}" train_125m.log python3 benchmarks/bench_train.py \
  --models 125m --recipes bf16,nvfp4,nvfp4@nv-reg-sr,nvfp4@nv-rows,nvfp4_no_sr \
  --graph step --steps 10 --warmup 2 --profile nvfp4 --out "$OUT/train_125m.json"
pack_out session7.tgz
