#!/usr/bin/env bash
# Session 12, call 3 (one GPU; calls 1-2 finished the paper runs on nvidia-h100-x2 and ran 17 of
# the 20 GPU tests of run_session12_gpu.sh). This call, most important first:
#  1. where the 1b step's peak memory goes (benchmarks/bench_memory.py: the live tensors at the
#     peak by allocation site) for bf16, fp8_blockwise and nvfp4 (issue 11, item 6);
#  2. the no-graph 125m nvfp4 step, base vs new interleaved (B N B N): session 11's one pair
#     measured the new host code slower (316 vs 219 ms), which no change explains;
#  3. the three compiled-switch GPU tests calls 1-2 did not reach (dense fprop, MoE all / fprop).
# base = session 11's starting code, made before the call and carried:
#     mkdir -p .devout/base && git archive 292e9b8 src | tar -x -C .devout/base
#     run: timeout 590 bash benchmarks/sessions/run_session12b_gpu.sh   (carry: [".devout"])
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s12b; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
NEW=$PWD/src BASE=$PWD/.devout/base/src
pack() { tar czf "$REAL_OUT/session12b.tgz" -C "$OUT" .; }
TAIL=100 step 170 memory_1b.log python3 benchmarks/bench_memory.py --models 1b \
  --recipes bf16,fp8_blockwise,nvfp4 --top 30; pack
i=0
for v in BASE NEW BASE NEW; do
  i=$((i + 1))
  TAIL=4 PYTHONPATH=${!v} step 60 "train_nograph_${i}_${v,,}.log" python3 \
    benchmarks/bench_train.py --models 125m --recipes nvfp4 --graph none --steps 8 --warmup 2
  pack
done
TAIL=8 step 120 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_schedule.py -k "compiled_switched and (fprop or moe)"; pack
