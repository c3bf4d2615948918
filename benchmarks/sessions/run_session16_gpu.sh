#!/usr/bin/env bash
# Session 16, call 1 (one H100 or H200): NVFP4's α in the GEMM epilogue (kernels/gemm_alpha.py).
# GPU tests of the kernel and the layer, its tile sweep at the 125m/1b fprop+dgrad shapes
# against cuBLAS with bf16 and fp32 outputs, then 125m and 1b steps with the epilogue on
# (default) and off (`@no-alpha-epi`) in one process each; one profiled 125m nvfp4 step.
#     run: timeout 570 bash benchmarks/sessions/run_session16_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s16; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session16.tgz" -C "$OUT" .; }
TAIL=8 step 90 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_gemm_alpha.py tests/test_expand.py tests/test_kernels_gemm.py -k "nvfp4 or alpha or epilogue"
pack
TAIL=40 step 120 alpha_mm.log python3 benchmarks/bench_alpha_mm.py
pack
TAIL=12 step 130 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --recipes bf16,nvfp4,nvfp4@no-alpha-epi,nvfp4_no_sr,nvfp4_no_sr@no-alpha-epi --steps 12 \
  --warmup 3 --profile nvfp4 --out "$OUT/train_125m.json"
pack
TAIL=10 step 170 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --recipes bf16,nvfp4,nvfp4@no-alpha-epi,nvfp4_no_sr --steps 8 --warmup 2 \
  --out "$OUT/train_1b.json"
pack
