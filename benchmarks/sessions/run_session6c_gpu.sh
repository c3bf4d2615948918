#!/usr/bin/env bash
# Session 6, third call: the results tables with the new default kernels, every recipe side by
# side in one process per size (125m: all seven, plus per-op profiles of fp8_blockwise and
# nvfp4; 1b: bf16 and four recipes). Back: $OUT/session6c.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=14 step "${TRAIN_SECS:-250}" train_125m_all.log python3 benchmarks/bench_train.py \
  --models 125m --graph step --steps 10 --warmup 2 --profile fp8_blockwise,nvfp4 \
  --out "$OUT/train_125m_all.json"
TAIL=10 step "${TRAIN1B_SECS:-290}" train_1b.log python3 benchmarks/bench_train.py --models 1b \
  --recipes bf16,fp8_tensorwise,fp8_blockwise,mxfp8,nvfp4 --graph step --steps 8 --warmup 2 \
  --out "$OUT/train_1b.json"
pack_out session6c.tgz
