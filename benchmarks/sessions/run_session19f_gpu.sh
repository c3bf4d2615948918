#!/usr/bin/env bash
# Session 19, call 6 (one H100): every recipe at 1b in one process (the README table's row;
# torchao's float8 rows are session 16's), with the E2M1 value path and the dy-pair splits in.
#     run: timeout 590 bash benchmarks/sessions/run_session19f_gpu.sh      (carry: .whl)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s19f; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session19f.tgz" -C "$OUT" .; }
TAIL=16 step 560 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --steps 6 --warmup 2 --out "$OUT/train_1b.json"
pack
