#!/usr/bin/env bash
# Session 49, call 2 (one H200, ~9 minutes): DeepGEMM chosen per shape by timing, wgrad
# (1x128 . 1x128) included. DeepGEMM built as in call 1, every bench_deepgemm GEMM JIT-compiled
# in parallel beside the GPU tests (DeepGEMM's, the no-sync / graph training tests of
# fp8_blockwise), then: the issue-12 layer (timed / @dg-prior / @cublas / torchao), 125m and 1b
# fp8_blockwise timed beside @dg-prior (session 48's rule), bf16 first and last.
#     run (carry [".whl", ".deps"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session49b_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache DG_JIT_CACHE_DIR=/tmp/dgcache
mkdir -p /tmp/dgcache
DG=$PWD/.deps/DeepGEMM
TAIL=2 step 150 dg_build.txt python3 tools/build_deepgemm.py "$DG" symbolic
export PYTHONPATH=$DG:${PYTHONPATH:-}
t0=$(date +%s)
python3 -m pytest -q -p no:benchmark -m gpu tests/test_gemm_deepgemm.py tests/test_train_gpu.py \
  -k "deepgemm or fp8_blockwise" > "$OUT/gpu_tests.txt" 2>&1 &
for i in $(seq 0 26); do
  timeout 120 python3 benchmarks/bench_deepgemm.py --only "$i" --warm > "/tmp/warm_$i.txt" 2>&1 &
done
wait
echo "tests + JIT warm-up: $(( $(date +%s) - t0 )) s"; tail -n 4 "$OUT/gpu_tests.txt"
TAIL=8 step 90 bench_linear.txt python3 benchmarks/bench_linear.py \
  --recipes fp8_blockwise,fp8_blockwise@dg-prior,fp8_blockwise@cublas,torchao_blockwise
TAIL=8 step 130 train_125m.txt python3 benchmarks/bench_train.py --graph step --models 125m \
  --recipes bf16,fp8_blockwise,fp8_blockwise@dg-prior,bf16 --out "$OUT/train_125m.json"
TAIL=8 step 200 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,fp8_blockwise,fp8_blockwise@dg-prior,bf16 --out "$OUT/train_1b.json"
