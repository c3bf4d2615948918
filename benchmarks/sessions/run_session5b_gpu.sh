#!/usr/bin/env bash
# Session 5, second single-GPU call: the GPU tests of this session's changes (Triton grouped
# GEMM, FSDP2 + CUDA graph on one rank, FP8 row + column kernel with packed column stores),
# the FP8 row + column A/B sweep, and the 125m step (whole step in one CUDA graph) for bf16 and
# the FP8 recipes. Everything comes back in $OUT/session5b.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=15 step "${TEST_SECS:-180}" gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_gemm_grouped.py tests/test_grouped_gpu.py tests/test_train_gpu.py \
  tests/test_kernels_quant.py -k "grouped or fsdp2_cuda_graph or fp8_rowcol"
TAIL=16 step "${QUANT_SECS:-100}" fp8_rowcol_sweep.log python3 benchmarks/bench_quant.py --no-ref \
  --only fp8_block/1x128_rowcol --shapes 16384x3072 --sweep --sweep-shapes 16384x768,16384x3072 \
  --sweep-only fp8_block/1x128_rowcol
TAIL=20 step "${TRAIN_SECS:-220}" train_125m_step_graph.log python3 benchmarks/bench_train.py \
  --models 125m --recipes "${RECIPES:-bf16,fp8_blockwise,mxfp8,fp8_tensorwise}" --graph step \
  --steps 10 --warmup 2 --out "$OUT/train_125m_step_graph.json"
pack_out session5b.tgz
