#!/usr/bin/env bash
# Session 11, the last call: the host-time changes (ops-layer view plans, no transposed tensor
# for a view check, one allocation per view, shared placeholders, host-side cdiv, a cheaper
# eager NVFP4 alpha) checked on CUDA and timed against the session's starting code, carried
# as .devout/base/src (git archive of 292e9b8): per-op host µs (bench_host.py) and the 125m
# step without the step graph (bench_train.py --graph none) for both; and the GPU checks
# session 10 left (compiled switched blocks, dense and MoE; --check-compile on CUDA).
# The logs are packed into $OUT/session11b.tgz after every step (the device's time may run
# out mid-call).
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s11b; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
NEW=$PWD/src BASE=$PWD/.devout/base/src
pack() { tar czf "$REAL_OUT/session11b.tgz" -C "$OUT" .; }
TAIL=6 step 150 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_linear.py tests/test_expand.py tests/test_train_gpu.py \
  -k "cuda_layer_matches or expanded or no_host_sync or graph_replays"; pack
for v in NEW BASE; do
  TAIL=24 PYTHONPATH=${!v} step 80 "host_${v,,}.log" python3 benchmarks/bench_host.py \
    --recipes nvfp4,fp8_blockwise; pack
done
TAIL=6 step 80 gpu_tests_switch.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  --tb=short tests/test_schedule.py -k compiled_switched; pack
TAIL=6 step 60 check_compile.log python3 -m microscale.train.cli train --recipe nvfp4 \
  --model micro --steps 6 --batch-size 4 --seq-len 128 --switch-step 3 --switch-mode fprop \
  --compile on --cuda-graph --check-compile --device cuda --out /tmp/check_compile \
  --no-progress; pack
for v in NEW BASE; do
  TAIL=8 PYTHONPATH=${!v} step 110 "train_125m_nograph_${v,,}.log" python3 \
    benchmarks/bench_train.py --models 125m --recipes nvfp4,fp8_blockwise --graph none \
    --steps 8 --warmup 2 $([ "$v" = NEW ] && echo "--bf16-also blocks:step") \
    --out "$OUT/train_125m_nograph_${v,,}.json"; pack
done
