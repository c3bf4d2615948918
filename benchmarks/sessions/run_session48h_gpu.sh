#!/usr/bin/env bash
# Session 48, call 8 (one H200, ~5 minutes): call 7 segfaulted with only torch imported first.
# Lead: a locale the environment names but the image lacks breaks libstdc++'s collate/num_put
# facets (pytorch#154364 saw segfaults from a missing en_US.UTF-8). The probe again under
# LC_ALL=C; if it runs, every GEMM is JIT-compiled in parallel and bench_deepgemm times them.
#     run (carry [".whl", ".deps"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session48h_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
{ echo "LANG=${LANG:-} LC_ALL=${LC_ALL:-} LC_CTYPE=${LC_CTYPE:-}"; locale -a 2>&1 | head -5; } \
  > "$OUT/tools.txt"
export LC_ALL=C LANG=C TRITON_CACHE_DIR=/tmp/tcache DG_JIT_CACHE_DIR=/tmp/dgcache
mkdir -p /tmp/dgcache
DG=$PWD/.deps/DeepGEMM
ln -sfn "$DG/third-party/cutlass/include/cutlass" "$DG/deep_gemm/include/cutlass"
ln -sfn "$DG/third-party/cutlass/include/cute" "$DG/deep_gemm/include/cute"
cp .deps/dg_built/_C.so "$DG/deep_gemm/_C.so"
export PYTHONPATH=$DG:${PYTHONPATH:-}
timeout 120 python3 -X faulthandler benchmarks/sessions/dg_locale_probe.py 2>&1 | tail -4 \
  | tee -a "$OUT/tools.txt"
cat "$OUT/tools.txt"
grep -q "^ok after" "$OUT/tools.txt" || { echo "still fails under LC_ALL=C"; exit 1; }
t0=$(date +%s)
for i in $(seq 0 14); do
  timeout 180 python3 benchmarks/bench_deepgemm.py --only "$i" --warm > "/tmp/warm_$i.txt" 2>&1 &
done
wait
echo "JIT warm-up: $(( $(date +%s) - t0 )) s" | tee -a "$OUT/tools.txt"
tail -n 2 /tmp/warm_*.txt > "$OUT/warm.txt"
TAIL=30 step 200 dg_bench.txt python3 benchmarks/bench_deepgemm.py --out "$OUT/dg.json"
