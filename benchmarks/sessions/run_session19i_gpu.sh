#!/usr/bin/env bash
# Session 19, call 9 (one H100): the final code's GPU tests (split pairs reusing their views'
# buffers; the MoE padded bound in whole 128-row tiles with MXFP8 rows expanded), the moe-1b
# mxfp8 step against session 18's code (.base/src, carried) in its own process, and ms.Linear
# at issue 12's shape.
#     run: timeout 590 bash benchmarks/sessions/run_session19i_gpu.sh      (carry: .whl, .base)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s19i; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
BASE="env PYTHONPATH=$PWD/.base/src:/tmp/site"
pack() { tar czf "$REAL_OUT/session19i.tgz" -C "$OUT" .; }
TAIL=8 step 170 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_grouped_gpu.py "tests/test_expand.py::test_gpu_expanded_views_match_reference" \
  -k "mxfp8 or nvfp4 or match"
pack
T="benchmarks/bench_train.py --models moe-1b --batch 8 --seq 2048 --graph step --steps 6
   --warmup 2 --recipes bf16,mxfp8"
TAIL=6 step 120 train_moe_new.log python3 $T --out "$OUT/train_moe_new.json"
TAIL=6 step 110 train_moe_base.log $BASE python3 $T --out "$OUT/train_moe_base.json"
pack
TAIL=14 step 110 bench_linear.log python3 benchmarks/bench_linear.py \
  --recipes nvfp4,mxfp8,mxfp4,fp8_blockwise
pack
