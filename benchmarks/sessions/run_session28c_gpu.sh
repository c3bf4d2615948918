#!/usr/bin/env bash
# Session 28, call 3 (one H100, ~9 minutes): the session's defaults (DU_IN_DGRAD, EXP_NAN_MAX,
# AMAX_UNCLAMPED on) at 1b against "@s27" (all three off), nvfp4 and nvfp4_no_sr; at 125m the
# reg amax pass at 4 programs an SM ("@amax-progs4": 128 registers a thread since
# AMAX_UNCLAMPED's main loop, where 3 were chosen at 152); issue 12's quantizer targets with
# the amax pass included (bench_quant, graph-replayed).
#     run: timeout 590 bash benchmarks/sessions/run_session28c_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s28c; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session28c.tgz" -C "$OUT" .; }
TAIL=8 step 300 train_1b.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,nvfp4@s27,nvfp4_no_sr --out "$OUT/train_1b.json"
pack
TAIL=8 step 160 train_125m.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes bf16,nvfp4,nvfp4@amax-progs4 \
  --out "$OUT/train_125m.json"
pack
TAIL=30 step 110 quant_targets.log python3 benchmarks/bench_quant.py --no-ref \
  --shapes 8192x8192 --only nvfp4/1x16,nvfp4/col_rht,nvfp4/rowcol_rne_rhtsr,nvfp4/rowcol_dy
pack
