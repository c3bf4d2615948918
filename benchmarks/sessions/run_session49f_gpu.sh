#!/usr/bin/env bash
# Session 49, call 9 (one H200, warm from calls 5-8: DeepGEMM's JIT cache kept): call 5 again
# with bench_deepgemm's cuBLASLt column fixed (path="torch"; calls 1 and 5 timed the
# dispatch's choice there, DeepGEMM wherever it took the call).
#     run (carry [".whl", ".deps"]): OUT=$OUT timeout 150 bash benchmarks/sessions/run_session49f_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache DG_JIT_CACHE_DIR=/tmp/dgcache
mkdir -p /tmp/dgcache
DG=$PWD/.deps/DeepGEMM
TAIL=1 step 60 dg_build.txt python3 tools/build_deepgemm.py "$DG" symbolic
export PYTHONPATH=$DG:${PYTHONPATH:-}
TAIL=28 step 80 dg_small.txt python3 benchmarks/bench_deepgemm.py --layers 50m,125m \
  --out "$OUT/dg_small.json"
