#!/usr/bin/env bash
# Session 22, call 4 (one H100): GPU tests call 3 cut short, then every recipe at 1b with the
# session's final code and bench_train's loop setting gradients to None (PyTorch's default and
# its whole-network CUDA-graph recipe), and the old loop (--keep-grads) beside it.
#     run: timeout 590 bash benchmarks/sessions/run_session22d_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s22d; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session22d.tgz" -C "$OUT" .; }
TAIL=6 step 110 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_kernels_quant.py tests/test_mlp.py tests/test_train_gpu.py \
  -k "weight_pair_reg or gpu_rowcol_exact or rowcol_reg_exact or cuda or fp8_blockwise"
pack
R=bf16,fp8_tensorwise,fp8_blockwise,mxfp8,mxfp4,nvfp4,nvfp4_no_sr
T="benchmarks/bench_train.py --graph step --warmup 2 --models 1b --steps 6"
TAIL=12 step 300 train_1b.log python3 $T --recipes $R --out "$OUT/train_1b.json"
pack
TAIL=8 step 130 train_1b_keep.log python3 $T --keep-grads --recipes bf16,fp8_blockwise \
  --out "$OUT/train_1b_keep.json"
pack
