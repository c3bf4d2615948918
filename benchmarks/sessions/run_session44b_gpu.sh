#!/usr/bin/env bash
# Session 44, call 2 (one H200, ~9 minutes): the FP8 1x128 pair at 3 stages by default
# (quant_fp8.CONFIG["NUM_STAGES_reg"] 3; fp32 inputs and two-input prologues keep
# NUM_STAGES_reg_wide 2): every GPU test of an FP8 blockwise path at the new default, then
# 1b and 125m fp8_blockwise training against 2 stages (fp8-s2) in one process each.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session44b_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=14 step 200 tests_fp8.txt python3 -m pytest -q -rfE -m gpu --tb=short --durations=5 \
  tests/test_kernels_quant.py tests/test_recompute.py tests/test_mlp.py tests/test_grouped_gpu.py \
  tests/test_grouped_weight_view.py tests/test_weight_view.py tests/test_weight_cache.py \
  tests/test_linear.py tests/test_train_gpu.py tests/test_edges.py \
  -k "(fp8_block or blockwise or fp8_pair or fp8_weight) and not mxfp8 and not fsdp2 and not fp8_tensor and not fp8_delayed"
TAIL=12 step 250 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,fp8_blockwise,fp8_blockwise@fp8-s2,fp8_blockwise --out "$OUT/train_1b.json"
TAIL=12 step 110 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 3 \
  --steps 10 --models 125m --recipes bf16,fp8_blockwise,fp8_blockwise@fp8-s2,fp8_blockwise \
  --out "$OUT/train_125m.json"
