#!/usr/bin/env bash
# Session 32, call 4 (one H100/H200, ~9.5 minutes): the GPU tests call 3 ran out of time for
# (the reg pass with FAST_E2M1 on by default) and the row kernel's with its SR tile, issue 12's
# 1x16 figures at the new defaults, and the README's 125m training table (every recipe and
# torchao float8, one process).
#     run: timeout 595 bash benchmarks/sessions/run_session32d_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=6 step 170 tests.txt python3 -m pytest -q -m gpu tests/test_kernels_nvfp4_row.py \
  tests/test_kernels_quant.py -k "row_kernel or test_gpu_nvfp4_reg_pass_matches or \
amax_pass_skips_nan or amax_unclamped"
TAIL=30 step 60 quant_1x16.txt python3 benchmarks/bench_quant.py --only nvfp4/1x16 \
  --shapes 8192x8192,16384x4096 --no-ref
TAIL=16 step 350 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --torchao \
  --recipes bf16,fp8_tensorwise,fp8_blockwise,mxfp8,mxfp4,nvfp4,nvfp4_no_sr \
  --out "$OUT/train_125m.json"
