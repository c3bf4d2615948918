#!/usr/bin/env bash
# Session 28, call 4 (one H100, ~6 minutes): the α GEMM unflattened from K >= 6144
# (gemm_alpha.CONFIG["NOFLAT_MIN_K"], session 26's sweep: the 1b down / dgrad_up / dgrad_qkv
# shapes 0.3-2.7% faster) at 1b against "@alpha-flat" (flattened at every K), after its GPU
# bit test (FLATTEN on and off give the same bits).
#     run: timeout 400 bash benchmarks/sessions/run_session28d_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s28d; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session28d.tgz" -C "$OUT" .; }
TAIL=4 step 70 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_gemm_alpha.py -k "test_gpu_alpha_mm_tma_and_pointer"
pack
TAIL=8 step 300 train_1b.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,nvfp4@alpha-flat --out "$OUT/train_1b.json"
pack
