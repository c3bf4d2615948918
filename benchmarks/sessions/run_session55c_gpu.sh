#!/usr/bin/env bash
# Session 55, call 2 (one H200, ~9 minutes). GPU tests of what e4b7fd5 changed (expanded FP4
# operands reach the GEMM ops without their block scales: the one-weight-view layer and
# the α GEMM); then 1b nvfp4 at today's defaults against @mm-scales (the
# scales handed over again: each weight's transposed tile scales computed for dgrad),
# alternated, and replay profiles of nvfp4 and nvfp4@nv-group with their launch sequences
# (why session 54's grouped NVFP4 weights ran 1.5-2% slower); compare with
#     python tools/seq_layer.py <call>/train_1b.seq.json 8 --by-name
#     run (carry [".whl"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session55c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=4 step 190 gpu_tests.txt python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_weight_view.py tests/test_gemm_alpha.py
TAIL=3 step 380 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,nvfp4@mm-scales,nvfp4,nvfp4@mm-scales,bf16 \
  --profile nvfp4,nvfp4@nv-group --out "$OUT/train_1b.json"
grep -hE '^(model|-----|1b )' "$OUT/train_1b.txt"
