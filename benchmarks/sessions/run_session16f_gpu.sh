#!/usr/bin/env bash
# Session 16, call 6 (one H100 or H200): the experts' factors in the grouped GEMM's epilogue
# (bf16 out): grouped GPU tests, the op-level MoE table and the moe-1b step; nvfp4_no_sr with
# its dy pairs on the rows pass up to 4096 columns (default) against the reg pass
# (`@nv-expcol-reg`) at 125m and 1b.
#     run: timeout 590 bash benchmarks/sessions/run_session16f_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s16f; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session16f.tgz" -C "$OUT" .; }
TAIL=8 step 120 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_grouped_gpu.py tests/test_gemm_grouped.py
pack
TAIL=30 step 120 moe_ops.log python3 benchmarks/bench_moe.py --no-train --graph \
  --recipes fp8_blockwise,mxfp8,nvfp4
pack
TAIL=12 step 170 train_moe.log python3 benchmarks/bench_train.py --models moe-1b --batch 8 \
  --seq 2048 --graph step --recipes bf16,torchao_moe_rowwise,fp8_blockwise,mxfp8,nvfp4 \
  --steps 6 --warmup 2 --out "$OUT/train_moe.json"
pack
TAIL=10 step 90 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --recipes bf16,nvfp4_no_sr,nvfp4_no_sr@nv-expcol-reg --steps 12 --warmup 3 \
  --out "$OUT/train_125m.json"
pack
TAIL=10 step 110 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --recipes bf16,nvfp4_no_sr,nvfp4_no_sr@nv-expcol-reg --steps 8 --warmup 2 \
  --out "$OUT/train_1b.json"
pack
