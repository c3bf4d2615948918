#!/usr/bin/env bash
# Session 40, call 5 (one H200, ~3 minutes, the budget's rest): the fused MLP's GPU tests, the
# part of call 4's test list its step limit cut, at the new ROW1 defaults.
#     run: OUT=$OUT timeout 170 bash benchmarks/sessions/run_session40e_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=25 step 150 tests.txt python3 -m pytest -q -rA -m gpu --tb=short tests/test_mlp.py
