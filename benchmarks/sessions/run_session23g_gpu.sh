#!/usr/bin/env bash
# Session 23, call 7 (one H100): call 6's two steps its limits cut, same code (5472771): the
# grouped ops, every targeted recipe (fwd+bwd, graph-replayed), and the grouped GPU tests.
#     run: timeout 590 bash benchmarks/sessions/run_session23g_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s23g; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session23g.tgz" -C "$OUT" .; }
TAIL=40 step 230 moe_ops.log python3 benchmarks/bench_moe.py --no-train --graph \
  --recipes fp8_blockwise,mxfp8,nvfp4
pack
TAIL=6 step 330 gpu_tests_grouped.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_grouped_gpu.py tests/test_gemm_grouped.py
pack
