#!/usr/bin/env bash
# Session 34, call 1 (one H100/H200, ~9 minutes): the GPU tests of session 34's kernel edits
# (same bits intended): the NVFP4 row kernel's RHT view (its caller's random bytes loaded as
# four wide parts, one edge-mask helper), the reg pass's RHT column view and the grouped reg
# kernel's (their block maxima from _utils.rotated_block_max); then the 125m nvfp4 step.
#     run: timeout 590 bash benchmarks/sessions/run_session34_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=6 step 330 tests.txt python3 -m pytest -q -m gpu tests/test_kernels_nvfp4_row.py \
  tests/test_kernels_quant.py -k "row_kernel or reg_pass or rht_randn or amax_unclamped"
TAIL=6 step 120 tests_grouped.txt python3 -m pytest -q -m gpu tests/test_grouped_gpu.py -k nvfp4
TAIL=8 step 120 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes bf16,nvfp4
