#!/usr/bin/env bash
# Session 24, call 3 (one H100): the GPU tests call 2's step limit cut (it passed 26, the
# FP8 / MXFP8 prologue tests and part of NVFP4's): NVFP4's prologues on the GPU, the fused
# relu² MLP's bits against the three modules (nvfp4, nvfp4_no_sr, FP8, MXFP8), the NVFP4
# reg-pass tests and the grouped NVFP4 kernels (the reg views' shared loads changed).
#     run: timeout 590 bash benchmarks/sessions/run_session24c_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s24c; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session24c.tgz" -C "$OUT" .; }
TAIL=15 step 420 gpu_tests.log python3 -m pytest -q -rA -m gpu -p no:cacheprovider \
  tests/test_recompute.py tests/test_mlp.py tests/test_kernels_quant.py tests/test_grouped_gpu.py \
  -k "nvfp4_prologues or same_bits_on_cuda or (nvfp4 and reg) or (grouped and nvfp4)"
pack
