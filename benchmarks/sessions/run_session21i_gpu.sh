#!/usr/bin/env bash
# Session 21, call 9 (one H100): every recipe at 1b and 125m, one process each, with this
# session's final code (NVFP4 one-view launches, the MXFP8 pair kernel on [32, 128] tiles),
# for the README's training table.
#     run: timeout 590 bash benchmarks/sessions/run_session21i_gpu.sh      (carry: .whl)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s21i; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session21i.tgz" -C "$OUT" .; }
R=bf16,fp8_tensorwise,fp8_blockwise,mxfp8,mxfp4,nvfp4,nvfp4_no_sr
T="benchmarks/bench_train.py --graph step --warmup 2 --recipes $R"
TAIL=12 step 300 train_1b.log python3 $T --models 1b --steps 6 --out "$OUT/train_1b.json"
pack
TAIL=12 step 260 train_125m.log python3 $T --models 125m --steps 8 --out "$OUT/train_125m.json"
pack
