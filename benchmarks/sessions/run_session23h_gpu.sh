#!/usr/bin/env bash
# Session 23, call 8 (one H100): the moe-1b step (CUDA graph) with the final code against
# torchao's FP8 rowwise MoE path in the same process (torchao 0.18 from the carried wheel).
#     run: timeout 590 bash benchmarks/sessions/run_session23h_gpu.sh      (carry: .whl)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s23h; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session23h.tgz" -C "$OUT" .; }
TAIL=12 step 380 moe1b_torchao.log python3 benchmarks/bench_moe.py --shapes qwen3_down \
  --recipes fp8_blockwise --train-graph step --train-recipes fp8_blockwise,torchao_moe_rowwise
pack
if grep -q '"recipe": "torchao_moe_rowwise", "error"' "$OUT/moe1b_torchao.log"; then
  TAIL=12 step 150 moe1b_torchao_nograph.log python3 benchmarks/bench_moe.py --shapes qwen3_down \
    --recipes fp8_blockwise --train-recipes fp8_blockwise,torchao_moe_rowwise
  pack
fi
