#!/usr/bin/env bash
# Session 22, call 6 (one H100): the relu² MLP fused for MXFP8 too (the MXFP8 register pair
# kernel applying relu_square / relu_square_grad as it loads): GPU tests, then 1b and 125m
# mxfp8 fused and "@mlp-unfused" in one process each.
#     run: timeout 590 bash benchmarks/sessions/run_session22f_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s22f; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session22f.tgz" -C "$OUT" .; }
TAIL=6 step 150 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_mlp.py tests/test_recompute.py tests/test_kernels_quant.py -k "cuda or rowcol_reg_exact or relu"
pack
T="benchmarks/bench_train.py --graph step --warmup 2"
TAIL=8 step 170 train_1b_mx.log python3 $T --models 1b --steps 6 \
  --recipes bf16,mxfp8,mxfp8@mlp-unfused --out "$OUT/train_1b_mx.json"
pack
TAIL=8 step 110 train_125m_mx.log python3 $T --models 125m --steps 8 \
  --recipes bf16,mxfp8,mxfp8@mlp-unfused --out "$OUT/train_125m_mx.json"
pack
