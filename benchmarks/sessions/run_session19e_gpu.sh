#!/usr/bin/env bash
# Session 19, call 5 (one H100): every recipe at 125m and torchao's float8 in one process
# (the README table's row), with the E2M1 value path and the dy-pair splits in.
#     run: timeout 590 bash benchmarks/sessions/run_session19e_gpu.sh      (carry: .whl)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s19e; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session19e.tgz" -C "$OUT" .; }
TAIL=16 step 420 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --torchao --steps 8 --warmup 2 --out "$OUT/train_125m.json"
pack
