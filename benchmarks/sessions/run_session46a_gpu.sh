#!/usr/bin/env bash
# Session 46, call 1 (one H200, ~8 minutes): the GPU tests session 45's call 7 left unrun at
# its final code (the MXFP8 prologue and recompute paths, the fused relu² MLP, every MXFP8
# register-kernel test), six pytest workers (pytest-xdist from the carried .whl/); then a
# profile of one 125m step of bf16, mxfp8 and nvfp4 (kernel times by category and by op).
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session46a_gpu.sh  (carry .whl)
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step 330 gpu_tests.txt python3 -m pytest -q -n 6 -m gpu tests/test_recompute.py \
  tests/test_mlp.py tests/test_kernels_quant.py -k "mx or mxfp8 or recompute or same_bits"
TAIL=30 step 220 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 125m --recipes bf16,mxfp8,nvfp4 --profile bf16,mxfp8,nvfp4 \
  --out "$OUT/train_125m.json"
