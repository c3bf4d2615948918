#!/usr/bin/env bash
# Session 48, call 4 (one H200, ~3 minutes): why call 3's DeepGEMM 1d2d GEMMs (fprop/dgrad)
# died with a segmentation fault before compiling a kernel: a host backtrace (cuda-gdb) of one
# fprop call, and one wgrad (1d1d) call with its accumulator (C = D, zeroed). The module built
# in call 3 is carried back as .deps/dg_built/_C.so.
#     run (carry [".whl", ".deps"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session48d_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache DG_JIT_CACHE_DIR=/tmp/dgcache
mkdir -p /tmp/dgcache
DG=$PWD/.deps/DeepGEMM
ln -sfn "$DG/third-party/cutlass/include/cutlass" "$DG/deep_gemm/include/cutlass"
ln -sfn "$DG/third-party/cutlass/include/cute" "$DG/deep_gemm/include/cute"
cp .deps/dg_built/_C.so "$DG/deep_gemm/_C.so"
export PYTHONPATH=$DG:${PYTHONPATH:-}
TAIL=12 step 100 w2.txt python3 -X faulthandler benchmarks/bench_deepgemm.py --only 2 --warm
TAIL=12 step 100 w0.txt python3 -X faulthandler benchmarks/bench_deepgemm.py --only 0 --warm
DG_JIT_DEBUG=1 timeout 200 cuda-gdb -batch -ex run -ex bt -ex "info sharedlibrary" \
  --args python3 benchmarks/bench_deepgemm.py --only 0 --warm > /tmp/gdb.txt 2>&1
grep -v "^\[New Thread\|^\[Thread" /tmp/gdb.txt | grep -B2 -A40 "SIGSEGV\|signal" | head -120 > "$OUT/gdb.txt"
tail -n 30 "$OUT/gdb.txt"
