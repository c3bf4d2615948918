#!/usr/bin/env bash
# Session 8, last call: the GPU tests the fifth call's time limit cut (no host sync, tensorwise
# kernels) and the new grouped-weight step tests; every recipe at 125m in one process; the 1b
# fp8_blockwise step with the grouping heuristic (per-layer weights at 1b). Back: session8f.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=8 step "${TEST_SECS:-170}" gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_train_gpu.py tests/test_weight_cache.py tests/test_kernels_quant.py \
  -k "grouped or no_host_sync or many or fp8_tensor"
TAIL=14 step "${T125_SECS:-200}" train_125m.log python3 benchmarks/bench_train.py \
  --models 125m --graph step --steps 8 --warmup 2 --out "$OUT/train_125m.json"
TAIL=8 step "${T1B_SECS:-130}" train_1b.log python3 benchmarks/bench_train.py \
  --models 1b --recipes bf16,fp8_blockwise --graph step --steps 8 --warmup 2 \
  --out "$OUT/train_1b.json"
pack_out session8f.tgz
