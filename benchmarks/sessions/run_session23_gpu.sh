#!/usr/bin/env bash
# Session 23, call 1 (one H100): the FP8 grouped GEMMs with their operands read through TMA
# descriptors (kernels/gemm_grouped_tma.py). GPU tests (TMA against the pointer kernels, and
# the grouped layer's tests with MICROSCALE_GROUPED_TMA=1); the tile sweep at issue 18's layers
# and moe-1b's expert GEMMs, pointer loads (default tile) against TMA (default and CONFIGS);
# then the fp8_blockwise grouped op (bench_moe, fwd+bwd) with TMA off and on, one process each.
#     run: timeout 590 bash benchmarks/sessions/run_session23_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s23a; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session23a.tgz" -C "$OUT" .; }
TAIL=8 step 110 gpu_tests.log env MICROSCALE_GROUPED_TMA=1 python3 -m pytest -q -m gpu \
  -p no:cacheprovider tests/test_gemm_grouped.py tests/test_grouped.py
pack
S="benchmarks/bench_grouped_sweep.py"
TAIL=45 step 80 sweep_issue.log python3 $S --shapes issue --kinds triton_fp8 --configs default
pack
TAIL=90 step 170 sweep_issue_tma.log python3 $S --shapes issue --kinds triton_fp8_tma \
  --configs default,0,1,3,4
pack
TAIL=40 step 80 sweep_moe1b_tma.log python3 $S --kinds triton_fp8,triton_fp8_tma --configs default,0,3,4
pack
M="benchmarks/bench_moe.py --no-train --graph --recipes fp8_blockwise"
TAIL=12 step 70 moe_ops_ptr.log env MICROSCALE_GROUPED_TMA=0 python3 $M
TAIL=12 step 70 moe_ops_tma.log env MICROSCALE_GROUPED_TMA=1 python3 $M
pack
