#!/usr/bin/env bash
# Session 26, call 4 (one H100): the α-epilogue GEMM's SMALL_TILE (4 stages, epilogue in two
# halves) for B of at most 3072·768 elements. GPU tests of the kernel knobs (same bits) and
# the layer; the 1b k/v shapes (not timed in call 3) against the one tile; then 125m nvfp4 /
# nvfp4_no_sr against "@alpha-one-tile" (the session-16 tile everywhere), one process.
#     run: timeout 590 bash benchmarks/sessions/run_session26d_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s26d; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session26d.tgz" -C "$OUT" .; }
TAIL=6 step 150 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_gemm_alpha.py
TAIL=8 step 60 alpha_mm.log python3 benchmarks/bench_alpha_mm.py --models 1b-kv --configs 0,11
pack
TAIL=8 step 330 train_125m.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m \
  --recipes bf16,nvfp4,nvfp4@alpha-one-tile,nvfp4_no_sr,nvfp4_no_sr@alpha-one-tile \
  --out "$OUT/train_125m.json"
pack
