#!/usr/bin/env bash
# Session 5, third single-GPU call: GPU tests of the grouped GEMM bound and the FP8 row + column
# kernel (new defaults), the 125m step for bf16 / fp8_blockwise with the new FP8 quantizer, and
# the moe-1b training step with the step in one CUDA graph. Returns $OUT/session5c.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=8 step "${TEST_SECS:-120}" gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_gemm_grouped.py tests/test_kernels_quant.py -k "grouped or fp8_rowcol"
TAIL=12 step "${TRAIN_SECS:-150}" train_125m_step_graph.log python3 benchmarks/bench_train.py \
  --models 125m --recipes bf16,fp8_blockwise --graph step --steps 10 --warmup 2 \
  --out "$OUT/train_125m_step_graph.json"
TAIL=14 step "${MOE_SECS:-240}" bench_moe_train_graph.log python3 benchmarks/bench_moe.py \
  --shapes qwen3_down --recipes fp8_blockwise --train-recipes fp8_blockwise,nvfp4,mxfp8 \
  --train-graph step
pack_out session5c.tgz
