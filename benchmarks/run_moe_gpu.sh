#!/usr/bin/env bash
# One device call for the MoE work (issue 18): the MoE GPU tests, then benchmarks/bench_moe.py
# (grouped GEMMs at DeepSeek-V3 and Qwen3-MoE shapes, every recipe, eager and replayed from a
# CUDA graph, the Triton grouped GEMM alone) and one moe-1b training step vs compiled bf16.
# Each step is time-limited; logs land under $OUT, returned as one archive (moe_gpu.tgz).
#     bash benchmarks/run_moe_gpu.sh                                  # tests + GEMMs + moe-1b
#     TESTS= TRAIN= bash benchmarks/run_moe_gpu.sh                    # GEMMs only
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
TESTS=${TESTS-tests/test_grouped_gpu.py tests/test_gemm_grouped.py}
if [ -n "$TESTS" ]; then
  TAIL=15 step "${TEST_SECS:-150}" moe_gpu_tests.log python3 -m pytest -q -m gpu \
    -p no:cacheprovider --maxfail=10 $TESTS ${EXTRA_TESTS:-}
fi
TAIL=40 step "${BENCH_SECS:-240}" bench_moe.log python3 benchmarks/bench_moe.py --no-train --graph \
  --recipes "${RECIPES:-fp8_blockwise,nvfp4,mxfp8}"
TRAIN=${TRAIN-fp8_blockwise,nvfp4}
if [ -n "$TRAIN" ]; then
  TAIL=12 step "${TRAIN_SECS:-200}" bench_moe_train.log python3 benchmarks/bench_moe.py \
    --shapes qwen3_down --recipes fp8_blockwise --train-recipes "$TRAIN"
fi
pack_out moe_gpu.tgz
