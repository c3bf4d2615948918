#!/usr/bin/env bash
# Session 15, call 2 (one H100 or H200): the MoE fixes from call 1's moe-1b profile.
# 1. GPU tests of the grouped GEMM and the grouped layer.
# 2. The grouped GEMM's tiles at the moe-1b expert GEMMs (FP8 and bf16 operands; "reduce"
#    now loads K in vectors: k_align) against bf16 torch._grouped_mm.
# 3. moe-1b, one CUDA graph a step: bf16, fp8_blockwise, mxfp8, nvfp4 (expert weights of the
#    block-local formats now quantized in one call per view), one profiled fp8_blockwise step.
#     run: timeout 560 bash benchmarks/sessions/run_session15b_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s15b; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session15b.tgz" -C "$OUT" .; }
TAIL=8 step 80 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_gemm_grouped.py tests/test_grouped_gpu.py
pack
TAIL=70 step 150 grouped_sweep.log python3 benchmarks/bench_grouped_sweep.py
pack
TAIL=30 step 300 train_moe.log python3 benchmarks/bench_train.py --models moe-1b --batch 8 \
  --seq 2048 --graph step --recipes bf16,fp8_blockwise,mxfp8,nvfp4 --steps 6 --warmup 2 \
  --profile fp8_blockwise --out "$OUT/train_moe.json"
pack
