#!/usr/bin/env bash
# Session 9, call 2: expanded operands (the quantizer writes bf16 value·scale for the GEMM
# operands consumed at once, no dequantize pass): the GPU tests of the new kernel paths, then
# the 125m step of every emulated recipe against bf16 in one process, with an nvfp4 profile.
# Back: $OUT/session9b.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step "${TEST_SECS:-240}" gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  --tb=short tests/test_expand.py tests/test_kernels_quant.py \
  -k "expand or nvfp4_reg_pass_matches or rowcol_reg"
TAIL=14 step "${TRAIN_SECS:-330}" train_125m.log python3 benchmarks/bench_train.py --models 125m \
  --recipes bf16,mxfp8,nvfp4,nvfp4_no_sr,mxfp4 --graph step --steps 8 --warmup 2 \
  --profile nvfp4 --out "$OUT/train_125m.json"
pack_out session9b.tgz
