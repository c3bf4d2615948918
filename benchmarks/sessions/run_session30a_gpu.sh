#!/usr/bin/env bash
# Next session, call 1 (one H100/H200, ~8 minutes): how much of the 1b cells' spread between
# processes (nvfp4 0.860-0.904x over five processes, sessions 28-29) is the bf16 baseline
# drifting within a process. bf16 runs first and again last; bench_train's ratios take the
# faster of the two (add_ratios: the best bf16 of the model), and both rows are printed.
#     run: timeout 590 bash benchmarks/sessions/run_session30a_gpu.sh      (device tool: carry [".whl"])
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s30a; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session30a.tgz" -C "$OUT" .; }
TAIL=16 step 570 train_1b.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,mxfp8,fp8_blockwise,fp8_tensorwise,nvfp4_no_sr,mxfp4,nvfp4,bf16 \
  --out "$OUT/train_1b.json"
pack
