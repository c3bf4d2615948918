#!/usr/bin/env bash
# Session 22, call 8 (one H100): every recipe at 1b and 125m, one process each, with the
# session's final code (relu² MLP fused for FP8 blockwise and MXFP8, 128x128 weight pairs in
# the register kernel, gradients set to None), for the README's training table.
#     run: timeout 590 bash benchmarks/sessions/run_session22h_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s22h; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session22h.tgz" -C "$OUT" .; }
R=bf16,fp8_tensorwise,fp8_blockwise,mxfp8,mxfp4,nvfp4,nvfp4_no_sr
T="benchmarks/bench_train.py --graph step --warmup 2 --recipes $R"
TAIL=12 step 300 train_1b.log python3 $T --models 1b --steps 6 --out "$OUT/train_1b.json"
pack
TAIL=12 step 260 train_125m.log python3 $T --models 125m --steps 8 --out "$OUT/train_125m.json"
pack
