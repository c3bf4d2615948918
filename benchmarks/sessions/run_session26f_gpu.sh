#!/usr/bin/env bash
# Session 26, call 6 (one H100, the last ~200 s of the budget): after the fix of call 5's
# compile error (nvfp4_amax_of returned early inside a constexpr branch; Triton compiled on
# past the return, into tl.arange(0, 0)), the NVFP4 reg pass at training shapes against the
# reference and the rows pass (atomic amax), and the amax pass with NaN, on the GPU.
#     run: timeout 200 bash benchmarks/sessions/run_session26f_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s26f; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session26f.tgz" -C "$OUT" .; }
TAIL=12 step 170 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider -rA \
  tests/test_kernels_quant.py -k "nvfp4_reg_pass_matches or amax_pass_skips"
pack
