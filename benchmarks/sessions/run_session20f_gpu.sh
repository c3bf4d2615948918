#!/usr/bin/env bash
# Session 20, call 6 (one H100): every recipe at 1b and 125m, one process each, with this
# session's final code (the faster NVFP4 amax pass walking backwards, the FP8 1x128 and MXFP8
# register pairs walking backwards), for the README's training table.
#     run: timeout 590 bash benchmarks/sessions/run_session20f_gpu.sh      (carry: .whl)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s20f; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session20f.tgz" -C "$OUT" .; }
R=bf16,fp8_tensorwise,fp8_blockwise,mxfp8,mxfp4,nvfp4,nvfp4_no_sr
T="benchmarks/bench_train.py --graph step --warmup 2 --recipes $R"
TAIL=12 step 290 train_1b.log python3 $T --models 1b --steps 6 --out "$OUT/train_1b.json"
pack
TAIL=12 step 250 train_125m.log python3 $T --models 125m --steps 8 --out "$OUT/train_125m.json"
pack
