#!/usr/bin/env bash
# Session 48, call 5 (one H200, ~6 minutes): DeepGEMM again. Call 4's backtrace: the segfault is
# in libstdc++'s stream insertion inside DeepGEMM's module (get_best_config printing its
# GemmDesc). Suspect: the process's libstdc++ older than the GCC 13 headers the module was
# built with (GCC 13 moved std::cout's initialisation into the library). Which libstdc++ the
# process maps, then the module linked with libstdc++ statically; if a 1d2d call then runs,
# every GEMM is JIT-compiled in parallel and timed (bench_deepgemm.py).
#     run (carry [".whl", ".deps"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session48e_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache DG_JIT_CACHE_DIR=/tmp/dgcache
mkdir -p /tmp/dgcache
DG=$PWD/.deps/DeepGEMM
ln -sfn "$DG/third-party/cutlass/include/cutlass" "$DG/deep_gemm/include/cutlass"
ln -sfn "$DG/third-party/cutlass/include/cute" "$DG/deep_gemm/include/cute"
{ echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  python3 -c "import torch; print([l.split()[-1] for l in open('/proc/self/maps') if 'stdc++' in l][:1])"
  ls -la /lib/x86_64-linux-gnu/libstdc++.so.6*; } > "$OUT/tools.txt" 2>&1
TAIL=4 step 200 dg_build.txt python3 tools/build_deepgemm.py "$DG" static
export PYTHONPATH=$DG:${PYTHONPATH:-}
TAIL=12 step 100 w0.txt python3 -X faulthandler benchmarks/bench_deepgemm.py --only 0 --warm
cat "$OUT/tools.txt"
grep -q "\"first_call_s\"" "$OUT/w0.txt" || { echo "1d2d still fails"; exit 1; }
t0=$(date +%s)
for i in $(seq 0 14); do
  timeout 150 python3 benchmarks/bench_deepgemm.py --only "$i" --warm > "/tmp/warm_$i.txt" 2>&1 &
done
wait
echo "JIT warm-up: $(( $(date +%s) - t0 )) s" | tee -a "$OUT/tools.txt"
tail -n 3 /tmp/warm_*.txt > "$OUT/warm.txt"
TAIL=30 step 200 dg_bench.txt python3 benchmarks/bench_deepgemm.py --out "$OUT/dg.json"
gzip -c "$DG/deep_gemm/_C.so" > "$OUT/dg_C.so.gz"
