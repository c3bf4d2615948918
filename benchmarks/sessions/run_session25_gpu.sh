#!/usr/bin/env bash
# Session 25, call 1 (one H100): MXFP8's register kernel writes one view alone (WRITE_ROW /
# WRITE_COL), so nn.recompute's MXFP8 views come from it: forward's row view of relu(u)² from
# u, backward's column view from u, written expanded (no decode pass). recompute_input's
# default now covers MXFP8 (layers >= 2048 wide). GPU tests of the single views and the fused
# MLP with recompute; then the steps: 125m mxfp8 against @recompute (forced on) and
# @xt-expanded (every kept MXFP8 xᵀ expanded); 1b mxfp8 (recompute on) against @no-recompute.
#     run: timeout 590 bash benchmarks/sessions/run_session25_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s25a; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session25a.tgz" -C "$OUT" .; }
TAIL=12 step 150 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_recompute.py tests/test_mlp.py tests/test_kernels_quant.py \
  -k "(relu_prologues and mxfp8) or (same_bits_on_cuda and mxfp8) or rowcol_reg"
pack
TAIL=8 step 220 train_125m.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes bf16,mxfp8,mxfp8@recompute,mxfp8@xt-expanded \
  --out "$OUT/train_125m.json"
pack
TAIL=8 step 200 train_1b.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 --recipes bf16,mxfp8,mxfp8@no-recompute \
  --out "$OUT/train_1b.json"
pack
