#!/usr/bin/env bash
# Session 30, call 1 (one H100/H200, ~6 minutes): the Gluon MXFP8 kernel's GPU tests, then its
# timing against bf16, the tl kernel, dequantize + cuBLAS and FP8 blockwise at 8192^3 and the
# LLaMA shapes, Gaussian and outlier data.
#     run: timeout 590 bash benchmarks/sessions/run_session30b_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s30b; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session30b.tgz" -C "$OUT" .; }
TAIL=30 step 200 tests.log python3 -m pytest -q -m gpu -x tests/test_kernels_mxfp8_wgmma.py
pack
TAIL=60 step 330 bench.log python3 benchmarks/bench_mxfp8_wgmma.py
pack
