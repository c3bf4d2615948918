#!/usr/bin/env bash
# Session 21, call 7 (one H100): the MXFP8 register pair kernel on fewer tile rows
# (quant_mx.CONFIG['BR_reg']): a sweep of the layer's x and dy pairs at 125m's widths (each
# config checked bit for bit), then 125m and 1b mxfp8 steps with each tile in one process.
#     run: timeout 590 bash benchmarks/sessions/run_session21g_gpu.sh      (carry: .whl)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s21g; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session21g.tgz" -C "$OUT" .; }
TAIL=40 step 170 quant_sweep_mx.log python3 benchmarks/bench_quant.py --no-ref \
  --shapes 16384x768 --only mxfp8/rowcol --sweep --sweep-shapes 16384x3072,16384x768 \
  --sweep-only mxfp8/rowcol_x,mxfp8/rowcol_dy
pack
T="benchmarks/bench_train.py --graph step --warmup 2"
TAIL=10 step 170 train_125m_mx.log python3 $T --steps 8 --models 125m \
  --recipes bf16,mxfp8@mx8-br128,mxfp8@mx8-br64,mxfp8@mx8-br64w2,mxfp8@mx8-br32 \
  --out "$OUT/train_125m_mx.json"
pack
TAIL=8 step 200 train_1b_mx.log python3 $T --steps 6 --models 1b \
  --recipes bf16,mxfp8@mx8-br128,mxfp8@mx8-br64,mxfp8@mx8-br64w2 --out "$OUT/train_1b_mx.json"
pack
