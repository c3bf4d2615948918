#!/usr/bin/env bash
# Session 8, seventh call: tensorwise current scaling now hands the quantizer the amax taken in
# the graph (the scale by the kernel's own IEEE division; the sixth call found Inductor's
# division 1 ulp off the eager scale); the tests that failed there first, then the FP8 tensorwise
# step at 125m and 1b. Back: $OUT/session8g.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step "${TEST_SECS:-170}" gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  --tb=short tests/test_train_gpu.py tests/test_linear.py tests/test_kernels_quant.py \
  -k "grouped or inductor_layer or (no_host_sync and fp8_t) or tensorwise or fp8_tensor"
TAIL=6 step "${T125_SECS:-80}" train_125m.log python3 benchmarks/bench_train.py \
  --models 125m --recipes bf16,fp8_tensorwise --graph step --steps 8 --warmup 2 \
  --out "$OUT/train_125m.json"
TAIL=6 step "${T1B_SECS:-110}" train_1b.log python3 benchmarks/bench_train.py \
  --models 1b --recipes bf16,fp8_tensorwise --graph step --steps 8 --warmup 2 \
  --out "$OUT/train_1b.json"
pack_out session8g.tgz
