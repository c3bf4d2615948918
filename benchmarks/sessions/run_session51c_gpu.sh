#!/usr/bin/env bash
# Session 51, call 3 (prepared in session 50, not yet run; one H200, ~5 minutes): the Triton
# FP8 kernel with K split over programs (session 50, `split_k`; interpreter-tested only): its
# GPU test against the reference, then the FP8 family at the 50m, 125m and 1b shapes, where
# issue 12 item 5's two laggards sit (125m's k/v wgrad 256x768x16384: 12 output tiles; 50m's
# k/v dgrad 16384x640x128). A split-K tile that beats the default by > 3% at a shape comes out
# as a suggested rule (sweep_rules.json), for gemm_paths.RULES once it holds in training.
#     run (carry [".whl"]): OUT=$OUT timeout 400 bash benchmarks/sessions/run_session51c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=4 step 120 gpu_tests.txt python3 -m pytest -q -p no:benchmark -m gpu \
  tests/test_kernels_gemm.py -k "fp8_block_torch_and_triton"
TAIL=30 step 240 sweep_fp8.txt python3 benchmarks/bench_gemm_sweep.py --quick --families fp8 \
  --models 50m,125m,1b --out "$OUT/sweep_rules.json"
