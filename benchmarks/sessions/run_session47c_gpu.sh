#!/usr/bin/env bash
# Session 47, call 3 (one H200, ~9 minutes): the FP8 blockwise / MXFP8 pairs' amax by the last
# program to finish (kernels._amax; no zeroed buffer, one fill launch fewer a pair): its GPU
# tests and the pair kernels' exactness tests, then 125m and 1b fp8_blockwise and mxfp8 against
# the old atomic_max path (@pair-amax-atomic) in one process each, bf16 first and last.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session47c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=8 step 185 gpu_tests.txt python3 -m pytest -q -m gpu -n 6 -p no:benchmark \
  tests/test_amax_last.py tests/test_kernels_quant.py tests/test_weight_cache.py \
  tests/test_weight_cache_mx8.py tests/test_grouped_gpu.py tests/test_train_gpu.py \
  -k "(amax_last or last_program or rowcol_reg or weight_pair_reg or mxfp8_rowcol or many_kernel or fp8 or mxfp8 or host_sync or graph_replays) and not test_gpu_quantize_exact"
TAIL=10 step 120 train_125m.txt python3 benchmarks/bench_train.py --graph step --models 125m \
  --recipes bf16,fp8_blockwise,fp8_blockwise@pair-amax-atomic,mxfp8,mxfp8@pair-amax-atomic,bf16 \
  --out "$OUT/train_125m.json"
TAIL=10 step 265 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,fp8_blockwise,fp8_blockwise@pair-amax-atomic,mxfp8,mxfp8@pair-amax-atomic,bf16 \
  --out "$OUT/train_1b.json"
