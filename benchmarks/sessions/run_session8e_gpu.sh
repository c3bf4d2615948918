#!/usr/bin/env bash
# Session 8, fifth call: FP8 tensorwise with the amax taken in the compiled graph (fused into
# the producing kernel) and folded into the cast pass (no amax pass): GPU tests, the 125m and 1b
# steps beside bf16, and a 1b profile. Back: $OUT/session8e.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=6 step "${TEST_SECS:-100}" gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_kernels_quant.py tests/test_linear.py tests/test_train_gpu.py \
  -k "tensor or tensorwise or no_host_sync"
TAIL=8 step "${T125_SECS:-120}" train_125m.log python3 benchmarks/bench_train.py \
  --models 125m --recipes bf16,fp8_tensorwise,fp8_blockwise --graph step --steps 10 \
  --warmup 2 --out "$OUT/train_125m.json"
TAIL=8 step "${T1B_SECS:-240}" train_1b.log python3 benchmarks/bench_train.py \
  --models 1b --recipes bf16,fp8_tensorwise --graph step --steps 8 --warmup 2 \
  --profile fp8_tensorwise --out "$OUT/train_1b.json"
pack_out session8e.tgz
