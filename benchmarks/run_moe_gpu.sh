#!/usr/bin/env bash
# One device call for the MoE work (issue 18): the MoE GPU tests, then benchmarks/bench_moe.py
# (grouped GEMMs at DeepSeek-V3 and Qwen3-MoE shapes, every recipe, and one moe-1b training
# step vs compiled bf16). Each step is time-limited; logs land under $OUT.
#     bash benchmarks/run_moe_gpu.sh                          # tests (~1 min) + bench (~4 min)
#     TESTS= BENCH_ARGS="--no-train" bash benchmarks/run_moe_gpu.sh    # GEMMs only
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
TESTS=${TESTS-tests/test_grouped_gpu.py}
if [ -n "$TESTS" ]; then
  timeout "${TEST_SECS:-120}" python3 -m pytest -q -m gpu -p no:cacheprovider --maxfail=10 $TESTS \
    2>&1 | grep -v '^USDT\|^DEBUG' | tee "$OUT/moe_gpu_tests.log" | tail -15
fi
timeout "${BENCH_SECS:-420}" python3 benchmarks/bench_moe.py ${BENCH_ARGS:-} 2>&1 \
  | grep -v '^USDT' | tee "$OUT/bench_moe.log" | grep -v '^{'
