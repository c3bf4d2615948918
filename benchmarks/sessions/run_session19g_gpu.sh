#!/usr/bin/env bash
# Session 19, call 7 (one H100): MXFP8 A operands written expanded by the register pair
# kernel (nn.function EXPAND_MXFP8; @mx8-codes: codes + the GEMM's dequantize pass, as before).
# GPU tests (the expanded views and layers, the MXFP8 pair kernel), the pairs, and the 125m and
# 1b steps with and without.
#     run: timeout 590 bash benchmarks/sessions/run_session19g_gpu.sh      (carry: .whl)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s19g; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session19g.tgz" -C "$OUT" .; }
TAIL=8 step 150 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_expand.py tests/test_kernels_quant.py -k "gpu_layer or gpu_expanded or rowcol_reg"
pack
TAIL=4 step 60 quant.log python3 benchmarks/bench_quant.py --no-ref \
  --only mxfp8/rowcol_x,mxfp8/rowcol_dy,mxfp8_e4m3/rowcol --shapes 16384x768,16384x2048,16384x8192
pack
TAIL=8 step 100 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --recipes bf16,mxfp8,mxfp8@mx8-codes --steps 8 --warmup 2 --out "$OUT/train_125m.json"
pack
TAIL=8 step 160 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --recipes bf16,mxfp8,mxfp8@mx8-codes --steps 6 --warmup 2 --out "$OUT/train_1b.json"
pack
