#!/usr/bin/env bash
# Session 44, call 1 (one H200, ~9.5 minutes): the MXFP8 pair kernel's scale bytes stored as
# words (quant_mx.CONFIG["SCALE_WORDS_reg"]: 1 a row's 4 bytes of a tile, 2 a column's 4 bytes
# of 4 row tiles; session 43 read 1.39 L1 store sectors a byte written), its GPU tests and the
# owed stages test (session 43's mend), a sweep at the 125m shapes, then 125m training: mxfp8
# with the words against the bytes, and fp8_blockwise with the FP8 pair at 3 stages where its
# tile's staged bytes do not double (quant_fp8.CONFIG["NUM_STAGES_reg_wide"] keeps 2).
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session44a_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=14 step 150 tests.txt python3 -m pytest -q -rfE -m gpu --tb=short \
  tests/test_kernels_quant.py -k "stages_exact or rowcol_reg or rowcol_exact or mx"
TAIL=40 step 100 sweep_mx_words.txt python3 benchmarks/bench_quant.py --no-ref --sweep \
  --sweep-only mxfp8/rowcol --sweep-with SCALE_WORDS_reg --sweep-shapes 16384x3072,16384x768 \
  --shapes 16384x768 --only mxfp8/rowcol_x
TAIL=16 step 300 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes \
  bf16,mxfp8,mxfp8@mx-words0,mxfp8@mx-words1,mxfp8@mx-words2,mxfp8,fp8_blockwise,fp8_blockwise@fp8-s3 \
  --out "$OUT/train_125m.json"
