#!/usr/bin/env bash
# Session 23, call 3 (one H100): after the grouped FP8 pair read through the row map (GATHER),
# the factor-of-one skip on the grouped wgrad and the one-read expert amax. GPU tests of the
# changed kernels; the grouped ops (fwd+bwd, graph-replayed) with a profile of fp8_blockwise,
# new code and session 22's (`git archive 428d25f src`, carried as .base/src) each in its own
# process; the moe-1b step replayed from a CUDA graph, new and base.
#     run: timeout 590 bash benchmarks/sessions/run_session23c_gpu.sh      (carry: .base)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s23c; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session23c.tgz" -C "$OUT" .; }
TAIL=8 step 150 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_gemm_grouped.py tests/test_grouped.py tests/test_grouped_gpu.py \
  tests/test_kernels_quant.py -k "grouped or rowcol or tma or expert or moe or gather"
pack
M="benchmarks/bench_moe.py --no-train --graph --recipes fp8_blockwise,mxfp8,nvfp4"
TAIL=40 step 110 moe_ops_new.log python3 $M --profile fp8_blockwise
pack
TAIL=30 step 80 moe_ops_base.log env PYTHONPATH=$PWD/.base/src python3 $M
pack
T="benchmarks/bench_moe.py --shapes qwen3_down --recipes fp8_blockwise --train-graph step \
  --train-recipes fp8_blockwise,mxfp8,nvfp4"
TAIL=10 step 110 moe1b_new.log python3 $T
pack
TAIL=10 step 110 moe1b_base.log env PYTHONPATH=$PWD/.base/src python3 $T
pack
