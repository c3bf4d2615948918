#!/usr/bin/env bash
# Session 49, call 1 (one H200, ~9 minutes; prepared in session 48): DeepGEMM where session 48
# did not reach. DeepGEMM built as in session 48 (tools/build_deepgemm.py, its own libstdc++;
# carry .deps/DeepGEMM: see benchmarks/results/h200_20261129_session48/NOTES.md for the tree),
# every bench_deepgemm GEMM JIT-compiled in parallel beside the GPU GEMM tests, then:
# bench_deepgemm with the 125m block's shapes; the issue-12 layer (bench_linear) fp8_blockwise
# with DeepGEMM and @cublas beside torchao's blockwise linear; 125m fp8_blockwise and @cublas.
#     run (carry [".whl", ".deps"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session49a_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache DG_JIT_CACHE_DIR=/tmp/dgcache
mkdir -p /tmp/dgcache
DG=$PWD/.deps/DeepGEMM
TAIL=2 step 150 dg_build.txt python3 tools/build_deepgemm.py "$DG" symbolic
export PYTHONPATH=$DG:${PYTHONPATH:-}
python3 -m pytest -q -p no:benchmark -m gpu tests/test_gemm_deepgemm.py tests/test_kernels_gemm.py \
  > "$OUT/gpu_tests.txt" 2>&1 &
for i in $(seq 0 26); do
  timeout 120 python3 benchmarks/bench_deepgemm.py --only "$i" --warm > "/tmp/warm_$i.txt" 2>&1 &
done
wait
tail -n 3 "$OUT/gpu_tests.txt"
TAIL=32 step 150 dg_bench.txt python3 benchmarks/bench_deepgemm.py --out "$OUT/dg.json"
TAIL=10 step 120 bench_linear.txt python3 benchmarks/bench_linear.py \
  --recipes fp8_blockwise,fp8_blockwise@cublas,torchao_blockwise
TAIL=8 step 130 train_125m.txt python3 benchmarks/bench_train.py --graph step --models 125m \
  --recipes bf16,fp8_blockwise,fp8_blockwise@cublas,bf16 --out "$OUT/train_125m.json"
