#!/usr/bin/env bash
# Session 10, call 8: the compiled-switch GPU tests after the high-precision GEMM inside the
# layer's Function became an op (microscale::hp_mm; traced as a plain matmul, Inductor on CUDA
# compiled hp_fprop blocks to zero gradients), and the compiled-layer exactness tests.
# Back: $OUT/session10d.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=20 step 200 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_train_gpu.py tests/test_linear.py -k "compiled_switch or inductor"
pack_out session10d.tgz
