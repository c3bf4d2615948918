#!/usr/bin/env bash
# Session 6, one single-GPU call: the register-resident FP8 1x128 and MXFP8 row + column
# quantizers (kernels/quant_rowcol_reg.py). GPU exactness tests (both NaN treatments, +-NaN,
# +-Inf; and the MX packed column stores of session 5, never run on a GPU), the row + column
# sweep with a bit-exactness check per config, and the 125m step (whole step in one CUDA graph)
# with the old and the new kernels side by side against one bf16 run. Back: $OUT/session6.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=25 step "${TEST_SECS:-170}" gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_kernels_quant.py -k "rowcol or gpu_rowcol_exact"
TAIL=40 step "${QUANT_SECS:-150}" rowcol_sweep.log python3 benchmarks/bench_quant.py --no-ref \
  --only fp8_block/1x128_rowcol,mxfp8_e4m3/rowcol --shapes 16384x3072 --sweep \
  --sweep-shapes 16384x768,16384x3072 --sweep-only fp8_block/1x128_rowcol,mxfp8_e4m3/rowcol
TAIL=16 step "${TRAIN_SECS:-230}" train_125m.log python3 benchmarks/bench_train.py \
  --models 125m --recipes "${RECIPES:-bf16,fp8_blockwise,fp8_blockwise@reg,fp8_blockwise@reg-nan0,mxfp8,mxfp8@reg,mxfp8@reg-nan0}" \
  --graph step --steps 10 --warmup 2 --out "$OUT/train_125m.json"
pack_out session6.tgz
