#!/usr/bin/env bash
# Session 50, call 4 (one H200, ~8 minutes): the 31 GPU tests call 3's time limit left unrun
# (session50_gpu_tests_left.txt: call 3's collection less the tests its log shows passed or
# skipped), then issue 12 item 5's two FP8 blockwise GEMMs under 1.0x bf16 (125m's k/v wgrad
# 256x768x16384, 50m's k/v dgrad 16384x640x128): the Triton FP8 kernel's tiles beside cuBLASLt
# at every 50m/125m shape (bench_gemm_sweep.py, fp8 family, T = 16384; DeepGEMM's own figures
# at these shapes are session 49's call 9).
#     run (carry [".whl"]): OUT=$OUT timeout 440 bash benchmarks/sessions/run_session50d_gpu.sh
set -uo pipefail
set -f                       # the test ids hold [..]: no globbing
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step 300 gpu_tests_left.txt python3 -m pytest -p no:benchmark -m gpu -n 8 -v -rfE \
  $(cat benchmarks/sessions/session50_gpu_tests_left.txt)
TAIL=30 step 110 sweep_fp8.txt python3 benchmarks/bench_gemm_sweep.py --quick --families fp8 \
  --models 50m,125m --out "$OUT/sweep_rules.json"
