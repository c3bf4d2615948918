#!/usr/bin/env bash
# Session 48, call 9 (one H200, ~5 minutes): LC_ALL=C did not help (call 8).
# Next lead: the module resolves libstdc++ symbols to copies already in the process; built
# with libstdc++ static and -Bsymbolic (its own copy). The probe, and if it runs, every GEMM
# JIT-compiled in parallel and timed by bench_deepgemm.
#     run (carry [".whl", ".deps"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session48i_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
{ echo "LANG=${LANG:-} LC_ALL=${LC_ALL:-} LC_CTYPE=${LC_CTYPE:-}"; locale -a 2>&1 | head -5; } \
  > "$OUT/tools.txt"
export LC_ALL=C LANG=C TRITON_CACHE_DIR=/tmp/tcache DG_JIT_CACHE_DIR=/tmp/dgcache
mkdir -p /tmp/dgcache
DG=$PWD/.deps/DeepGEMM
ln -sfn "$DG/third-party/cutlass/include/cutlass" "$DG/deep_gemm/include/cutlass"
ln -sfn "$DG/third-party/cutlass/include/cute" "$DG/deep_gemm/include/cute"
TAIL=3 step 200 dg_build.txt python3 tools/build_deepgemm.py "$DG" symbolic
export PYTHONPATH=$DG:${PYTHONPATH:-}
timeout 120 python3 -X faulthandler benchmarks/sessions/dg_locale_probe.py 2>&1 | tail -4 \
  | tee -a "$OUT/tools.txt"
cat "$OUT/tools.txt"
grep -q "^ok after" "$OUT/tools.txt" || { echo "still fails built -Bsymbolic"; exit 1; }
t0=$(date +%s)
for i in $(seq 0 14); do
  timeout 150 python3 benchmarks/bench_deepgemm.py --only "$i" --warm > "/tmp/warm_$i.txt" 2>&1 &
done
wait
echo "JIT warm-up: $(( $(date +%s) - t0 )) s" | tee -a "$OUT/tools.txt"
tail -n 2 /tmp/warm_*.txt > "$OUT/warm.txt"
TAIL=30 step 180 dg_bench.txt python3 benchmarks/bench_deepgemm.py --out "$OUT/dg.json"
