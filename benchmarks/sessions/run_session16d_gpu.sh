#!/usr/bin/env bash
# Session 16, call 4 (one H100 or H200): nvfp4_no_sr's dy pairs on the rows pass (expanded
# column view written by the kernel, `@nv-expcol-rows`) against reg + decode at 125m and 1b;
# every recipe at 125m with torchao; the moe-1b step (its dense layers use the α epilogue).
#     run: timeout 580 bash benchmarks/sessions/run_session16d_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s16d; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session16d.tgz" -C "$OUT" .; }
TAIL=20 step 220 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --torchao --recipes bf16,fp8_tensorwise,fp8_blockwise,mxfp8,mxfp4,nvfp4,nvfp4_no_sr,nvfp4_no_sr@nv-expcol-rows \
  --steps 12 --warmup 3 --out "$OUT/train_125m.json"
pack
TAIL=10 step 150 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --recipes bf16,nvfp4_no_sr,nvfp4_no_sr@nv-expcol-rows --steps 8 --warmup 2 \
  --out "$OUT/train_1b.json"
pack
TAIL=12 step 190 train_moe.log python3 benchmarks/bench_train.py --models moe-1b --batch 8 \
  --seq 2048 --graph step --recipes bf16,torchao_moe_rowwise,fp8_blockwise,mxfp8,nvfp4 \
  --steps 6 --warmup 2 --out "$OUT/train_moe.json"
pack
