#!/usr/bin/env bash
# Session 25, call 2 (one H100): the 125m table with the current code, every recipe and
# torchao 0.18 float8 (tensorwise, rowwise) in one process, plus "@xt-expanded" (wgrad's xᵀ
# kept expanded, CONFIG["EXPAND_XT"]) for mxfp8 and nvfp4, and a profile of one nvfp4 and
# one mxfp8 step. First the expansion GPU tests (EXPAND_XT's bits).
#     run: timeout 590 bash benchmarks/sessions/run_session25b_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s25b; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session25b.tgz" -C "$OUT" .; }
TAIL=6 step 120 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_expand.py -k "layer_with_expansion"
pack
TAIL=16 step 420 train_125m.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --torchao --profile nvfp4,mxfp8 \
  --recipes bf16,fp8_tensorwise,fp8_blockwise,mxfp8,mxfp4,nvfp4,nvfp4_no_sr,mxfp8@xt-expanded,nvfp4@xt-expanded \
  --out "$OUT/train_125m.json"
pack
