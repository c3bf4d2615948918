#!/usr/bin/env bash
# Session 32, call 3 (one H100/H200, ~9 minutes): the row kernel's new defaults (NAN_TILE,
# STORE64, RNE codes at [8, 16] blocks) and the reg pass's FAST_E2M1 default: GPU tests, issue
# 12's 1x16 figures at 8192² and 16384x4096, a tile sweep around the new RNE tile, and the 1b
# nvfp4 step with the row kernel taking the split pairs' row launch or not, in one process.
#     run: timeout 590 bash benchmarks/sessions/run_session32c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=6 step 200 tests.txt python3 -m pytest -q -m gpu tests/test_kernels_nvfp4_row.py \
  tests/test_kernels_quant.py -k "nvfp4 or row_kernel"
TAIL=40 step 150 quant_1x16.txt python3 benchmarks/bench_quant.py --only nvfp4/1x16 \
  --shapes 8192x8192,16384x4096 --no-ref --sweep --sweep-shapes 8192x8192 \
  --sweep-with STORE64 --sweep-only nvfp4/1x16@amax_given,nvfp4/1x16_sr@amax_given
TAIL=8 step 220 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 --recipes bf16,nvfp4,nvfp4@row1,nvfp4
