#!/usr/bin/env bash
# Session 48, call 7 (one H200, ~2 minutes): call 6's symbolized backtrace puts DeepGEMM's
# segfault in std::regex (its JIT's include parser) through the locale's collate facet, as
# call 4's was through num_put: the process's C++ locale is broken for the module. One 1d2d
# GEMM in a process that imports nothing first, then triton first, then microscale first.
#     run (carry [".whl", ".deps"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session48g_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export DG_JIT_CACHE_DIR=/tmp/dgcache
mkdir -p /tmp/dgcache
DG=$PWD/.deps/DeepGEMM
ln -sfn "$DG/third-party/cutlass/include/cutlass" "$DG/deep_gemm/include/cutlass"
ln -sfn "$DG/third-party/cutlass/include/cute" "$DG/deep_gemm/include/cute"
cp .deps/dg_built/_C.so "$DG/deep_gemm/_C.so"
export PYTHONPATH=$DG:${PYTHONPATH:-}
for first in "" triton microscale; do
  echo "### first: ${first:-nothing}"
  timeout 120 python3 -X faulthandler benchmarks/sessions/dg_locale_probe.py $first 2>&1 | tail -4
done | tee "$OUT/probe.txt"
