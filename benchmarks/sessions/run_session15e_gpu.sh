#!/usr/bin/env bash
# Session 15, call 5 (one H100 or H200): the moe-1b step with every recipe and torchao's FP8
# rowwise MoE path (NVFP4 expert weights now through the microscale::quantize_nvfp4_experts
# op), one profiled nvfp4 step; then the 1b dense FP8 recipes with and without the recompute
# switch (issue 11's memory target) in one process.
#     run: timeout 570 bash benchmarks/sessions/run_session15e_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s15e; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session15e.tgz" -C "$OUT" .; }
TAIL=8 step 70 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_grouped_gpu.py
pack
TAIL=30 step 250 train_moe.log python3 benchmarks/bench_train.py --models moe-1b --batch 8 \
  --seq 2048 --graph step --recipes bf16,torchao_moe_rowwise,fp8_blockwise,mxfp8,nvfp4 \
  --steps 6 --warmup 2 --profile nvfp4 --out "$OUT/train_moe.json"
pack
TAIL=14 step 230 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --recipes bf16,fp8_tensorwise,fp8_tensorwise@recompute,fp8_blockwise,fp8_blockwise@recompute \
  --steps 8 --warmup 2 --out "$OUT/train_1b.json"
pack
