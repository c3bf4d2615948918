#!/usr/bin/env bash
# Session 48, call 6 (one H200, ~2 minutes): DeepGEMM's module built -O0 -g, and a symbolized
# host backtrace (cuda-gdb) of the 1d2d call that segfaults (calls 3-5), without DG_JIT_DEBUG.
#     run (carry [".whl", ".deps"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session48f_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache DG_JIT_CACHE_DIR=/tmp/dgcache
mkdir -p /tmp/dgcache
DG=$PWD/.deps/DeepGEMM
ln -sfn "$DG/third-party/cutlass/include/cutlass" "$DG/deep_gemm/include/cutlass"
ln -sfn "$DG/third-party/cutlass/include/cute" "$DG/deep_gemm/include/cute"
TAIL=4 step 200 dg_build.txt python3 tools/build_deepgemm.py "$DG" debug
export PYTHONPATH=$DG:${PYTHONPATH:-}
timeout 200 cuda-gdb -batch -ex run -ex bt -ex "frame 0" -ex "info locals" -ex "frame 1" \
  -ex "info locals" --args python3 benchmarks/bench_deepgemm.py --only 0 --warm > /tmp/gdb.txt 2>&1
grep -v "^\[New Thread\|^\[Thread\|^\[Detaching" /tmp/gdb.txt | grep -A80 "SIGSEGV" | head -150 > "$OUT/gdb.txt"
grep -v "^\[New Thread\|^\[Thread\|^\[Detaching" /tmp/gdb.txt | tail -40 > "$OUT/gdb_tail.txt"
head -c 6000 "$OUT/gdb.txt"
