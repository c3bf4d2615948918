#!/usr/bin/env bash
# Session 29, call 5 (one H100/H200, ~3 minutes): the MXFP8 FP8-tensor-core kernel's GPU tests
# (every sweep config, now that the TMA configs get their descriptors right) and the config
# sweep again for the two TMA rows that crashed in call 4.
#     run: timeout 300 bash benchmarks/sessions/run_session29d_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s29d; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session29d.tgz" -C "$OUT" .; }
TAIL=6 step 110 gpu_tests.log python3 -m pytest -q -p no:cacheprovider -m gpu \
  tests/test_kernels_mxfp8.py
pack
TAIL=30 step 110 mxfp8_configs.log python3 benchmarks/bench_gemm_sweep.py --mxfp8-configs
pack
