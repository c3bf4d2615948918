#!/usr/bin/env bash
# Session 8, third call: the GEMM path table without session 4's eager-timed rules (the FP4
# mainloop rule at 16384x768x768 was 1.84x slower graph-replayed): the 125m FP4 recipes, the 1b
# step for the FP8 recipes and nvfp4 (grouped FP8 weights, column-major 1x128 scales), and the
# graph-timed sweep at the 50m shapes the old rules covered. Back: $OUT/session8c.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=10 step "${T125_SECS:-170}" train_125m.log python3 benchmarks/bench_train.py \
  --models 125m --recipes bf16,nvfp4,nvfp4_no_sr,mxfp4 --graph step --steps 10 --warmup 2 \
  --profile nvfp4 --out "$OUT/train_125m.json"
TAIL=10 step "${T1B_SECS:-270}" train_1b.log python3 benchmarks/bench_train.py \
  --models 1b --recipes bf16,fp8_blockwise,fp8_tensorwise,nvfp4 --graph step --steps 8 \
  --warmup 2 --out "$OUT/train_1b.json"
TAIL=20 step "${SWEEP_SECS:-100}" gemm_sweep.log python3 benchmarks/bench_gemm_sweep.py --quick \
  --models 50m --families fp8,fp4 --out "$OUT/gemm_table_suggested.json"
pack_out session8c.tgz
