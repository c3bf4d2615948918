#!/usr/bin/env bash
# Session 24, call 4 (one H100): call 3 passed NVFP4's ten GPU prologue tests and the first
# fused-MLP one before its step limit (Triton compiles of the reg kernel's variants); the
# fused relu² MLP's bits on the GPU against the three modules, every recipe it fuses.
#     run: timeout 400 bash benchmarks/sessions/run_session24d_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s24d; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session24d.tgz" -C "$OUT" .; }
TAIL=15 step 330 gpu_tests.log python3 -m pytest -v -m gpu -p no:cacheprovider tests/test_mlp.py \
  -k "same_bits_on_cuda"
pack
