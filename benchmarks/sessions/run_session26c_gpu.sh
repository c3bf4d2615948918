#!/usr/bin/env bash
# Session 26, call 3 (one H100): NVFP4's α-epilogue GEMM (kernels/gemm_alpha.py) at the 125m
# and 1b fprop/dgrad shapes, k/v's included, against cuBLAS bf16: the default tile against
# the same tile with the loop not flattened, warp-specialized, its epilogue in two halves.
#     run: timeout 590 bash benchmarks/sessions/run_session26c_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s26c; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session26c.tgz" -C "$OUT" .; }
TAIL=30 step 400 alpha_mm.log python3 benchmarks/bench_alpha_mm.py --models 125m,125m-kv,1b \
  --configs 0,8,9,10,11,12,13
pack
