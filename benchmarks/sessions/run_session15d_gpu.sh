#!/usr/bin/env bash
# Session 15, call 4 (one H100 or H200): the MoE step after the NVFP4 amax atomics, stacked NVFP4 expert weights and the
# FP8 tile-scale fast path, with torchao's FP8 rowwise MoE path in the same process; the op-level grouped
# fwd+bwd targets (issue 18) graph-replayed.
#     run: timeout 560 bash benchmarks/sessions/run_session15d_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s15d; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session15d.tgz" -C "$OUT" .; }
TAIL=8 step 80 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_gemm_grouped.py tests/test_grouped_gpu.py
pack
TAIL=30 step 300 train_moe.log python3 benchmarks/bench_train.py --models moe-1b --batch 8 \
  --seq 2048 --graph step --recipes bf16,torchao_moe_rowwise,fp8_blockwise,mxfp8,nvfp4 \
  --steps 6 --warmup 2 --profile nvfp4 --out "$OUT/train_moe.json"
pack
TAIL=40 step 150 moe_ops.log python3 benchmarks/bench_moe.py --no-train --graph \
  --recipes fp8_blockwise,mxfp8,nvfp4
pack
