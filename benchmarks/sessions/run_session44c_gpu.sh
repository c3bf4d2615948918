#!/usr/bin/env bash
# Session 44, call 3 (one H200, ~5 minutes): the MXFP8 pair kernel on taller tiles with its
# tile loop software-pipelined ([128, 128] with 8 warps, [64, 128] with 4; 128 registers at 2
# stages offline), swept at the 125m shapes (bits checked), then 125m mxfp8 training with the
# two likeliest against the default in one process.
#     run: OUT=$OUT timeout 400 bash benchmarks/sessions/run_session44c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=44 step 120 sweep_mx_tall.txt python3 benchmarks/bench_quant.py --no-ref --sweep \
  --sweep-only mxfp8/rowcol --sweep-with NUM_STAGES_reg+BR_reg+num_warps_reg+PROGS_PER_SM_reg \
  --sweep-shapes 16384x3072,16384x768 \
  --shapes 16384x768 --only mxfp8/rowcol_x
TAIL=14 step 200 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 3 \
  --steps 10 --models 125m --recipes bf16,mxfp8,mxfp8@mx8-128w8s2,mxfp8@mx8-64w4s2,mxfp8 \
  --out "$OUT/train_125m.json"
