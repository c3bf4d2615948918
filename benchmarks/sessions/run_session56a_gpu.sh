#!/usr/bin/env bash
# Session 56, call 1 (one H200, ~8 minutes). Session 55's call 7, refused then: the NVFP4 many
# kernel's 16 MB bound on Wᵀ's scale bytes (ebaf087/22c75f7: in the kernel up to 16 MB, per
# weight copies above; GPU tests parametrized over both), its timing at the 125m and 1b weight
# sets; then 125m nvfp4 per layer (the default) against @nv-group (every NVFP4 weight in two
# launches a step, Wᵀ's scale bytes from the kernel: 0.27 ms shorter than at session 55's A/B),
# alternated three times in one process.
#     run (carry [".whl"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session56a_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=4 step 150 gpu_tests.txt python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_weight_cache.py
TAIL=8 step 70 many.txt python3 benchmarks/bench_many.py --fmt nvfp4 --models 125m,1b
TAIL=14 step 330 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --models 125m --recipes bf16,nvfp4,nvfp4@nv-group,bf16 --repeat 3 \
  --out "$OUT/train_125m.json"
grep -hE '^(model|-----|125m )' "$OUT/train_125m.txt"
