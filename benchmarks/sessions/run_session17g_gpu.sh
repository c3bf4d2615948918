#!/usr/bin/env bash
# Session 17, call 7 (one H100): the file splits (gemm_fp4 -> gemm_alpha, nn/function ->
# nn/saved, ops -> op_specs) on a GPU: the layer, GEMM, recompute, weight-cache and training
# GPU tests (sync-free steps, CUDA graphs, compiled), and a short 125m step table as a check.
#     run: timeout 580 bash benchmarks/sessions/run_session17g_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s17g; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session17g.tgz" -C "$OUT" .; }
TAIL=6 step 380 gpu_tests.log python3 -m pytest -q -p no:cacheprovider --tb=short -m gpu \
  tests/test_gemm_alpha.py tests/test_linear.py tests/test_recompute.py \
  tests/test_weight_cache.py tests/test_train_gpu.py tests/test_kernels_gemm.py
pack
TAIL=10 step 150 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --recipes bf16,fp8_tensorwise,nvfp4 --steps 10 --warmup 3 --out "$OUT/train_125m.json"
pack
