#!/usr/bin/env bash
# Session 28, call 2 (one H100, ~7 minutes): the NVFP4 amax pass without the RHT's input clamp
# (quant_nvfp4.CONFIG["AMAX_UNCLAMPED"], opt-in: interpreter-tested, offline SASS 15.4 -> 13.4
# instructions an element for the x pair) on the GPU: its bit test (ordinary values, a chunk
# that overflows unclamped, Inf), and 125m nvfp4 / nvfp4_no_sr with "@amax-unclamped" against
# the new defaults (DU_IN_DGRAD and EXP_NAN_MAX on since call 1) and "@s27" (both off).
#     run: timeout 590 bash benchmarks/sessions/run_session28b_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s28b; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session28b.tgz" -C "$OUT" .; }
TAIL=8 step 120 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider -rA \
  tests/test_kernels_quant.py -k "amax_unclamped or amax_pass_skips_nan"
pack
TAIL=10 step 420 train_125m.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m \
  --recipes bf16,nvfp4,nvfp4@amax-unclamped,nvfp4@s27,nvfp4_no_sr,nvfp4_no_sr@amax-unclamped,mxfp8 \
  --out "$OUT/train_125m.json"
pack
