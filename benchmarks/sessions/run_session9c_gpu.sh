#!/usr/bin/env bash
# Session 9, call 4: the expanded paths after the E4M3 decode fix (GPU tests against the CPU
# reference, the layer tests on CUDA), then the 125m step with an mxfp8 profile.
# Back: $OUT/session9c.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step "${TEST_SECS:-250}" gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  --tb=short tests/test_expand.py tests/test_linear.py -k "expand or cuda_layer_matches_cpu_reference"
TAIL=14 step "${TRAIN_SECS:-280}" train_125m.log python3 benchmarks/bench_train.py --models 125m \
  --recipes bf16,mxfp8,nvfp4,mxfp4 --graph step --steps 8 --warmup 2 \
  --profile mxfp8 --out "$OUT/train_125m.json"
pack_out session9c.tgz
