#!/usr/bin/env bash
# Session 51, call 6 (one H200, ~4 minutes): the one GPU test session 50's run of the whole
# suite did not finish (running at call 4's 300 s limit; its 11 siblings passed), alone, with
# its duration, under the pair maxima now on by default.
#     run (carry [".whl"]): OUT=$OUT timeout 280 bash benchmarks/sessions/run_session51f_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step 250 tests.txt python3 -m pytest -q -p no:benchmark -m gpu -rxXs --durations=5 \
  "tests/test_recompute.py::test_nvfp4_prologues_match_the_reference_on_edge_values[masked-relu_square_grad-dtype2-cuda]"
