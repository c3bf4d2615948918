#!/usr/bin/env bash
# Session 17, call 6 (the same warm H100 as call 5): the grouped tests call 5 ran out of time
# on, the MoE ops fwd+bwd for every block-scaled recipe, and moe-1b against torchao's FP8
# rowwise MoE path with every recipe (the docs' table).
#     run: timeout 580 bash benchmarks/sessions/run_session17f_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s17f; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session17f.tgz" -C "$OUT" .; }
TAIL=6 step 150 gpu_tests.log python3 -m pytest -q -p no:cacheprovider --tb=short \
  tests/test_grouped_nvfp4_reg.py tests/test_grouped_gpu.py
pack
TAIL=30 step 130 moe_ops.log python3 benchmarks/bench_moe.py --no-train --graph \
  --recipes fp8_blockwise,mxfp8,nvfp4
pack
TAIL=12 step 270 train_moe.log python3 benchmarks/bench_train.py --models moe-1b --batch 8 \
  --seq 2048 --graph step --recipes bf16,torchao_moe_rowwise,fp8_blockwise,mxfp8,nvfp4 \
  --steps 6 --warmup 2 --out "$OUT/train_moe.json"
pack
