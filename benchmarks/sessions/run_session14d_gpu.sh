#!/usr/bin/env bash
# Session 14, call 4 (one H100 or H200): MXFP4's 32-point RHT as an exact ±1/8 sum on tensor
# cores times fp32(sqrt 2) (it was 32 FMAs an element). Its GPU tests, the 125m step (mxfp4
# with the kernel's default tile and two others, nvfp4, bf16), then the moe-1b step with
# torchao's FP8 rowwise MoE path (call 3 ran out of its 200 s before torchao's row; carry the
# torchao wheel, .whl/).
#     run: timeout 590 bash benchmarks/sessions/run_session14d_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s14d; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session14d.tgz" -C "$OUT" .; }
TAIL=15 step 110 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_kernels_quant.py tests/test_expand.py -k "mx or rht"
pack
TAIL=30 step 200 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --recipes bf16,mxfp4,mxfp4@mx-8w,mxfp4@mx-64x64,nvfp4 --steps 12 --warmup 3 \
  --out "$OUT/train_125m.json"
pack
TAIL=30 step 250 moe_graph.log python3 benchmarks/bench_moe.py --shapes qwen3_down --recipes "" \
  --train-recipes torchao_moe_rowwise --train-graph step --steps 6 --warmup 2
pack
