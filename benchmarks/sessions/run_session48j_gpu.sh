#!/usr/bin/env bash
# Session 48, call 10 (one H200, ~5 minutes, the session's last device time): fp8_blockwise's
# fprop/dgrad through DeepGEMM in training (kernels/gemm_deepgemm.py), against the same process's
# cuBLASLt run (@cublas) at 1b, bf16 first and last. DeepGEMM built as in call 9 (its own
# libstdc++); its 1b kernels JIT-compiled in parallel first, beside its GPU tests.
#     run (carry [".whl", ".deps"]): OUT=$OUT timeout 330 bash benchmarks/sessions/run_session48j_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache DG_JIT_CACHE_DIR=/tmp/dgcache
mkdir -p /tmp/dgcache
DG=$PWD/.deps/DeepGEMM
ln -sfn "$DG/third-party/cutlass/include/cutlass" "$DG/deep_gemm/include/cutlass"
ln -sfn "$DG/third-party/cutlass/include/cute" "$DG/deep_gemm/include/cute"
TAIL=2 step 120 dg_build.txt python3 tools/build_deepgemm.py "$DG" symbolic
export PYTHONPATH=$DG:${PYTHONPATH:-}
t0=$(date +%s)
python3 -m pytest -q -p no:benchmark tests/test_gemm_deepgemm.py > "$OUT/gpu_tests.txt" 2>&1 &
for i in 0 1 3 4 6 7 9 10; do
  timeout 100 python3 benchmarks/bench_deepgemm.py --only "$i" --warm > "/tmp/warm_$i.txt" 2>&1 &
done
wait
echo "tests + JIT warm-up: $(( $(date +%s) - t0 )) s"; tail -n 3 "$OUT/gpu_tests.txt"
TAIL=8 step 200 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,fp8_blockwise,fp8_blockwise@cublas,bf16 --out "$OUT/train_1b.json"
