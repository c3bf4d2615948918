#!/usr/bin/env bash
# Session 8, first call: the GPU tests session 7 left unrun (NVFP4 reg pass row masking, the dy
# pairs' amax on the reg amax kernel, the v3 move), a 125m profile of bf16 beside the quantized
# recipes (by kernel, by microscale op and by eager aten op), and the GEMM path sweep at the
# 125m and 1b linears (separate q/k/v/o, up, down) for the fp8 and fp4 families.
# Back: $OUT/session8.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=8 step "${TEST_SECS:-130}" gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_kernels_quant.py tests/test_linear.py -k "nvfp4 or reg"
TAIL=16 step "${TRAIN_SECS:-230}" train_125m.log python3 benchmarks/bench_train.py \
  --models 125m --recipes bf16,fp8_blockwise,nvfp4,mxfp8 --graph step --steps 10 --warmup 2 \
  --profile bf16,fp8_blockwise,nvfp4,mxfp8 --out "$OUT/train_125m.json"
TAIL=30 step "${SWEEP_SECS:-150}" gemm_sweep.log python3 benchmarks/bench_gemm_sweep.py --quick \
  --models 125m,1b --families fp8,fp4 --out "$OUT/gemm_table_suggested.json"
pack_out session8.tgz
