#!/usr/bin/env bash
# Session 49, call 3 (one H200, ~9 minutes): the README's 125m row on the timed DeepGEMM choice
# (its timer now doubles the device sleep until the host's launches are hidden). DeepGEMM built
# as in call 1, the 125m GEMMs JIT-compiled in parallel beside DeepGEMM's GPU tests, then every
# recipe and torchao float8 in one process, bf16 first and last.
#     run (carry [".whl", ".deps"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session49c_gpu.sh
# (Session 56, call 2: the same, on that day's defaults, for the README's 125m row.)
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache DG_JIT_CACHE_DIR=/tmp/dgcache
mkdir -p /tmp/dgcache
DG=$PWD/.deps/DeepGEMM
TAIL=2 step 150 dg_build.txt python3 tools/build_deepgemm.py "$DG" symbolic
export PYTHONPATH=$DG:${PYTHONPATH:-}
t0=$(date +%s)
python3 -m pytest -q -p no:benchmark -m gpu tests/test_gemm_deepgemm.py > "$OUT/gpu_tests.txt" 2>&1 &
for i in $(seq 15 26); do
  timeout 120 python3 benchmarks/bench_deepgemm.py --only "$i" --warm > "/tmp/warm_$i.txt" 2>&1 &
done
wait
echo "tests + JIT warm-up: $(( $(date +%s) - t0 )) s"; tail -n 2 "$OUT/gpu_tests.txt"
TAIL=16 step 420 train_125m.txt python3 benchmarks/bench_train.py --graph step --models 125m \
  --torchao --out "$OUT/train_125m.json"
