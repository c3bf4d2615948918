#!/usr/bin/env bash
# Session 10, call 5: the compiled-switch GPU tests again after the fix of op outputs that
# started inside their storage (ops._fresh: a column-only NVFP4/MXFP8 call returned its amax at
# element 1 of a shared buffer, which Inductor's alignment assert refused in hp_fprop mode).
# Back: $OUT/session10c.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=20 step 240 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_train_gpu.py -k "compiled_switch or cuda_graph"
pack_out session10c.tgz
