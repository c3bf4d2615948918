#!/usr/bin/env bash
# Session 50, call 3 (one H200, ~10 minutes): every GPU test of the suite (`-m gpu`, 378 tests)
# in one pytest run over 8 workers, on the code the session ends with; DeepGEMM from the
# warm machine's .deps (built by call 1) where it is there, so its GPU tests run too. `-v`
# prints each result as it lands, so a run the time limit cuts still says what passed.
#     run (no carry needed beyond .whl): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session50c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache DG_JIT_CACHE_DIR=/tmp/dgcache
if ls .deps/DeepGEMM/deep_gemm/_C*.so >/dev/null 2>&1; then
  export PYTHONPATH=$PWD/.deps/DeepGEMM:$PYTHONPATH
else
  deepgemm_env
fi
TAIL=30 step 540 gpu_suite.txt python3 -m pytest -p no:benchmark -m gpu -n 8 -v \
  --durations=25 -rfE tests/
grep -c " PASSED " "$OUT/gpu_suite.txt"; grep -E " (FAILED|ERROR) " "$OUT/gpu_suite.txt" | head -20
