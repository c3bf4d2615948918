#!/usr/bin/env bash
# Session 48, call 3 (one H200, ~8 minutes): DeepGEMM's FP8 blockwise GEMMs against cuBLASLt
# (our fp8_blockwise path) at the 1b block's and issue 12's shapes. DeepGEMM's source (with
# CUTLASS's and fmt's headers) is carried as .deps/DeepGEMM (git-ignored; see
# benchmarks/results/h200_20261129_session48/NOTES.md for the revisions), built here.
#     run (carry [".whl", ".deps"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session48c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache DG_JIT_CACHE_DIR=/tmp/dgcache
DG=$PWD/.deps/DeepGEMM
ln -sfn "$DG/third-party/cutlass/include/cutlass" "$DG/deep_gemm/include/cutlass"
ln -sfn "$DG/third-party/cutlass/include/cute" "$DG/deep_gemm/include/cute"
{ nvcc --version | tail -2; g++ --version | head -1; nproc; } | tee "$OUT/tools.txt"
TAIL=15 step 330 dg_build.txt python3 tools/build_deepgemm.py "$DG" plain
export PYTHONPATH=$DG:${PYTHONPATH:-}
# JIT-compile every GEMM's kernel at once, one process each, so the timed run hits the cache
t0=$(date +%s)
for i in $(seq 0 14); do
  timeout 150 python3 benchmarks/bench_deepgemm.py --only "$i" --warm > "/tmp/warm_$i.txt" 2>&1 &
done
wait
echo "JIT warm-up: $(( $(date +%s) - t0 )) s" | tee -a "$OUT/tools.txt"
tail -n 4 /tmp/warm_*.txt > "$OUT/warm.txt"; tail -n 8 /tmp/warm_0.txt
TAIL=30 step 170 dg_bench.txt python3 benchmarks/bench_deepgemm.py --out "$OUT/dg.json"
# the built module and the JIT cache come back, to be carried by the next call (.deps/dg_built)
gzip -c "$DG/deep_gemm/_C.so" > "$OUT/dg_C.so.gz"
tar czf "$OUT/dgcache.tgz" -C /tmp dgcache
ls -la "$OUT"
