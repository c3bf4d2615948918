#!/usr/bin/env bash
# Session 31, call 5 (one H100/H200, ~8 minutes): the NVFP4 row kernel (quant_nvfp4_row: a row
# view alone, a 16-element block a thread, E2M1 codes through the rounded value times 2^-126):
# its GPU tests and the E2M1 value/code test compiled (fp32 subnormals must be kept), the
# graph-replayed 1x16 views and the SR dy pair per tile config against the reg pass, and the
# 125m nvfp4 step with and without it in one process.
#     run: timeout 590 bash benchmarks/sessions/run_session31e_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=6 step 110 tests.txt python3 -m pytest -q -m gpu tests/test_kernels_nvfp4_row.py \
  tests/test_e2m1_values.py
TAIL=60 step 250 quant_row1.txt python3 benchmarks/bench_quant.py --only nvfp4/1x16 \
  --shapes 8192x8192 --no-ref --sweep --sweep-shapes 8192x8192,16384x2048 \
  --sweep-only nvfp4/1x16@amax_given,nvfp4/1x16_sr@amax_given,nvfp4/rowcol_dy,nvfp4/1x16
TAIL=10 step 220 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes bf16,nvfp4@no-row1,nvfp4@row1,nvfp4_no_sr@no-row1,nvfp4_no_sr@row1,nvfp4@no-row1
