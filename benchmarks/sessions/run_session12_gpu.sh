#!/usr/bin/env bash
# Next session's first call (written in session 11, not yet run). Session 11 changed only host
# code (ops-layer view plans, placeholders, no transposed tensors for checks, host cdiv, ...);
# its GPU A/B was noise-bound (identical code measured 40-55% apart between two processes).
# This call: (1) the GPU tests session 11's call 3 did not reach (compiled no-sync steps, CUDA
# graph replays, the MoE fprop compiled switch), (2) the host A/B interleaved, three rounds:
# base = session 11's starting code, made here before the call and carried:
#     mkdir -p .devout/base && git archive 292e9b8 src | tar -x -C .devout/base
#     run: timeout 590 bash benchmarks/sessions/run_session12_gpu.sh   (carry: [".devout"])
# Back: $OUT/session12.tgz, packed after every step.
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s12; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
NEW=$PWD/src BASE=$PWD/.devout/base/src
pack() { tar czf "$REAL_OUT/session12.tgz" -C "$OUT" .; }
TAIL=8 step 200 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_train_gpu.py tests/test_schedule.py \
  -k "no_host_sync or graph_replays or compiled_switched"; pack
[ -d "$BASE" ] || { echo "no $BASE: make it before the call (see the header)"; exit 0; }
for round in 1 2 3; do
  for v in BASE NEW; do
    TAIL=14 PYTHONPATH=${!v} step 60 "host_${v,,}_$round.log" python3 benchmarks/bench_host.py \
      --recipes nvfp4,fp8_blockwise; pack
  done
done
i=0
for v in BASE NEW BASE NEW; do
  i=$((i + 1))
  TAIL=6 PYTHONPATH=${!v} step 80 "train_nograph_${i}_${v,,}.log" python3 \
    benchmarks/bench_train.py --models 125m --recipes nvfp4 --graph none --steps 8 --warmup 2
  pack
done
