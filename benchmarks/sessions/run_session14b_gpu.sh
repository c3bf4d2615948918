#!/usr/bin/env bash
# Session 14, call 2 (one H100 or H200): the MXFP4 kernel writing expanded views (its GPU
# tests, then 125m training A/B against the codes + decode pass, with profiles of mxfp4 and
# nvfp4), and the moe-1b step against torchao's FP8 rowwise MoE path with token groups padded
# to 16 (call 1: torchao's own padding asserted). Carry the torchao wheel (.whl/, see
# run_session14_gpu.sh).
#     run: timeout 590 bash benchmarks/sessions/run_session14b_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s14b; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session14b.tgz" -C "$OUT" .; }
TAIL=15 step 120 gpu_tests.log python3 -m pytest -q -m gpu tests/test_expand.py -x
pack
TAIL=60 step 250 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --recipes bf16,mxfp4,mxfp4@mx-codes,nvfp4 --profile mxfp4,nvfp4 --out "$OUT/train_125m.json"
pack
TAIL=30 step 180 moe_graph.log python3 benchmarks/bench_moe.py --shapes qwen3_down --recipes "" \
  --train-recipes torchao_moe_rowwise,fp8_blockwise --train-graph step --steps 6 --warmup 2
pack
