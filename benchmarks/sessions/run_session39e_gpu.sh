#!/usr/bin/env bash
# Session 39, call 5 (one H100/H200, ~3 minutes): the review's stronger same-bits test (every
# weight gradient from the α kernel, counted by a spy, the fused relu² MLP against the three
# modules) and the layer's wgrad test, at the review's code.
#     run: timeout 590 bash benchmarks/sessions/run_session39e_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=10 step 300 tests.txt python3 -m pytest -q -rA -m gpu --tb=short \
  "tests/test_mlp.py::test_gpu_same_bits_with_wgrad_alpha_in_the_epilogue" \
  "tests/test_gemm_alpha.py::test_gpu_layer_wgrad_alpha_in_the_epilogue"
