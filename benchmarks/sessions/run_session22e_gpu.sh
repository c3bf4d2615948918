#!/usr/bin/env bash
# Session 22, call 5 (one H100): every recipe at 125m with the session's final code and
# bench_train's loop setting gradients to None, and the old loop (--keep-grads) beside it;
# then the fp8_blockwise training-step GPU tests (call 4's were cut by their time limit).
#     run: timeout 590 bash benchmarks/sessions/run_session22e_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s22e; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session22e.tgz" -C "$OUT" .; }
R=bf16,fp8_tensorwise,fp8_blockwise,mxfp8,mxfp4,nvfp4,nvfp4_no_sr
T="benchmarks/bench_train.py --graph step --warmup 2 --models 125m --steps 8"
TAIL=12 step 280 train_125m.log python3 $T --recipes $R,fp8_blockwise@mlp-unfused --out "$OUT/train_125m.json"
pack
TAIL=8 step 90 train_125m_keep.log python3 $T --keep-grads --recipes bf16,fp8_blockwise \
  --out "$OUT/train_125m_keep.json"
pack
TAIL=6 step 190 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_train_gpu.py tests/test_recompute.py -k "fp8_blockwise"
pack
