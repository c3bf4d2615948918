#!/usr/bin/env bash
# Session 19, call 8 (one H100): every recipe at 125m (with torchao's float8) and at 1b, each
# in one process, on the session's final kernels (E2M1 values, dy-pair splits, MXFP8 expanded):
# the README table's rows.
#     run: timeout 590 bash benchmarks/sessions/run_session19h_gpu.sh      (carry: .whl)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s19h; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session19h.tgz" -C "$OUT" .; }
TAIL=14 step 250 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --torchao --steps 8 --warmup 2 --out "$OUT/train_125m.json"
pack
TAIL=12 step 250 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --steps 6 --warmup 2 --out "$OUT/train_1b.json"
pack
