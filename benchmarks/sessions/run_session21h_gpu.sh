#!/usr/bin/env bash
# Session 21, call 8 (one H100): the MXFP8 register pair kernel on [32, 128] tiles, 2 warps, 6
# programs an SM (the new default): which outputs [64, 128] with 2 warps got wrong in call 7
# (diag), the GPU tests of the pair kernels, then 1b, 125m and moe-1b mxfp8 against the
# [128, 128] tile (mxfp8@mx8-br128) in the same process.
#     run: timeout 590 bash benchmarks/sessions/run_session21h_gpu.sh      (carry: .whl)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s21h; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session21h.tgz" -C "$OUT" .; }
TAIL=16 step 60 diag_mx_tiles.log python3 benchmarks/diag_mx_tiles_gpu.py
pack
TAIL=16 step 100 gpu_tests.log python3 -m pytest -v -m gpu -p no:cacheprovider \
  tests/test_kernels_quant.py tests/test_expand.py -k "rowcol_reg_exact or mxfp8"
pack
T="benchmarks/bench_train.py --graph step --warmup 2"
TAIL=6 step 130 train_1b_mx.log python3 $T --steps 6 --models 1b \
  --recipes bf16,mxfp8@mx8-br128,mxfp8 --out "$OUT/train_1b_mx.json"
pack
TAIL=6 step 80 train_125m_mx.log python3 $T --steps 8 --models 125m \
  --recipes bf16,mxfp8@mx8-br128,mxfp8 --out "$OUT/train_125m_mx.json"
pack
TAIL=6 step 150 train_moe_mx.log python3 $T --steps 6 --models moe-1b --batch 8 --seq 2048 \
  --recipes bf16,mxfp8@mx8-br128,mxfp8 --out "$OUT/train_moe_mx.json"
pack
