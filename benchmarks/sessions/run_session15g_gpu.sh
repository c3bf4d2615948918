#!/usr/bin/env bash
# Session 15, call 7 (one H100 or H200): every recipe at 125m in one process with the session's
# code, torchao float8 tensorwise and rowwise as the peers.
#     run: timeout 570 bash benchmarks/sessions/run_session15g_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s15g; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session15g.tgz" -C "$OUT" .; }
TAIL=16 step 330 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --recipes bf16,fp8_tensorwise,fp8_blockwise,mxfp8,mxfp4,nvfp4,nvfp4_no_sr --torchao \
  --steps 12 --warmup 3 --out "$OUT/train_125m.json"
pack
# MXFP8 with the recompute switch (default off for it since call 6) against without, at 1b
TAIL=8 step 170 train_1b_mxfp8.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --recipes bf16,mxfp8,mxfp8@recompute --steps 8 --warmup 2 --out "$OUT/train_1b_mxfp8.json"
pack
