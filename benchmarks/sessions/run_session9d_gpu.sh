#!/usr/bin/env bash
# Session 9, call 5: the FP4-only expanded operands and the dequantize kernel's per-element
# decode (GPU tests), then the 125m step of every emulated recipe and the 1b nvfp4 step against
# bf16 in the same process. Back: $OUT/session9d.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step "${TEST_SECS:-200}" gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  --tb=short tests/test_expand.py tests/test_kernels_gemm.py
TAIL=10 step "${TRAIN_SECS:-200}" train_125m.log python3 benchmarks/bench_train.py --models 125m \
  --recipes bf16,mxfp8,nvfp4,nvfp4_no_sr,mxfp4 --graph step --steps 8 --warmup 2 \
  --out "$OUT/train_125m.json"
TAIL=8 step "${TRAIN_SECS:-200}" train_1b.log python3 benchmarks/bench_train.py --models 1b \
  --recipes bf16,nvfp4 --graph step --steps 6 --warmup 2 --out "$OUT/train_1b.json"
pack_out session9d.tgz
