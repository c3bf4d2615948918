#!/usr/bin/env bash
# Session 6, second call: the new defaults (register-resident FP8 1x128 and MXFP8 row + column
# kernels, 4 warps, 2 programs per SM, NaN byte from the hardware) through every kernel and
# layer GPU test, then the 125m and 1b steps with the old kernels (@sub) side by side.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step "${TEST_SECS:-150}" gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider -x \
  tests/test_kernels_quant.py tests/test_linear.py
TAIL=12 step "${TRAIN_SECS:-150}" train_125m.log python3 benchmarks/bench_train.py --models 125m \
  --recipes bf16,fp8_blockwise,fp8_blockwise@sub,mxfp8,mxfp8@sub --graph step --steps 10 \
  --warmup 2 --out "$OUT/train_125m.json"
TAIL=10 step "${TRAIN1B_SECS:-200}" train_1b.log python3 benchmarks/bench_train.py --models 1b \
  --recipes bf16,fp8_blockwise,fp8_blockwise@sub,mxfp8 --graph step --steps 8 --warmup 2 \
  --out "$OUT/train_1b.json"
pack_out session6b.tgz
