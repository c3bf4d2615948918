#!/usr/bin/env bash
# Session 56, call 5 (one H200, ~5 minutes). Small NVFP4 weights are grouped by the harness
# since this session (the Trainer enters ms.weight_cache every step for nvfp4 / nvfp4_no_sr
# models whose weights are small): its GPU tests that train through it, the Trainer with and
# without the CUDA graph across a precision switch, compiled and eager, and the grouped step.
#     run (carry [".whl"]): OUT=$OUT timeout 330 bash benchmarks/sessions/run_session56d_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=8 step 290 gpu_tests.txt python3 -m pytest -q -m gpu -p no:cacheprovider -n 3 \
  tests/test_train_gpu.py -k "trainer_cuda_graph or trainer_compiled_switch or grouped_weight"
