#!/usr/bin/env bash
# Session 50, call 4 (one H200, ~5 minutes): issue 12 item 5's two FP8 blockwise GEMMs under
# 1.0x bf16 (125m's k/v wgrad 256x768x16384, 50m's k/v dgrad 16384x640x128): the Triton FP8
# kernel's tiles beside cuBLASLt at every 50m/125m shape (bench_gemm_sweep.py, fp8 family,
# T = 16384), and DeepGEMM beside cuBLASLt at the same shapes in the same call.
#     run (carry [".whl", ".deps"]): OUT=$OUT timeout 400 bash benchmarks/sessions/run_session50d_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
deepgemm_env
TAIL=20 step 150 sweep_fp8.txt python3 benchmarks/bench_gemm_sweep.py --quick --families fp8 \
  --models 50m,125m --out "$OUT/sweep_rules.json"
TAIL=30 step 120 dg_small.txt python3 benchmarks/bench_deepgemm.py --layers 50m,125m \
  --out "$OUT/dg_small.json"
