#!/usr/bin/env bash
# Session 22, call 2 (one H100): FP8 128x128 weight pairs (fp32 masters -> W and Wᵀ) from the
# register pair kernel with one scale a tile (quant_fp8.CONFIG['W128'] = "reg") against the
# tile kernel ("fp8w-tile"): GPU tests, the pair's launch sweep at 1b's weight shapes, the 1b
# step (same process, with a profile of fp8_blockwise).
#     run: timeout 590 bash benchmarks/sessions/run_session22b_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s22b; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session22b.tgz" -C "$OUT" .; }
TAIL=8 step 120 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_kernels_quant.py -k "weight_pair_reg or gpu_rowcol_exact or rowcol_reg_exact"
pack
TAIL=14 step 120 quant_sweep_w128.log python3 benchmarks/bench_quant.py --sweep --sweep-only \
  fp8_block/128x128_rowcol_fp32 --sweep-shapes 8192x2048,2048x8192 --only fp8_block/128x128_rowcol_fp32 \
  --shapes 8192x2048,2048x8192
pack
TAIL=30 step 300 train_1b_w128.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --models 1b --steps 6 --recipes bf16,fp8_blockwise,fp8_blockwise@fp8w-tile \
  --profile fp8_blockwise --out "$OUT/train_1b_w128.json"
pack
