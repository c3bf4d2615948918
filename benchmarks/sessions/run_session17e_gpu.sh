#!/usr/bin/env bash
# Session 17, call 5 (one H100, fresh): the grouped NVFP4 layout in one launch
# (quant_nvfp4_grouped_reg.group_tables; per-view amax and seed buffers): its tests on CUDA and
# the grouped GPU tests, the moe-1b pairs again, and the moe-1b nvfp4 step against the older
# grouped kernels (@grp-nv-old), after the file splits (gemm_fp4, nn/function, ops).
#     run: timeout 580 bash benchmarks/sessions/run_session17e_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s17e; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session17e.tgz" -C "$OUT" .; }
TAIL=8 step 200 gpu_tests.log python3 -m pytest -q -p no:cacheprovider --tb=short \
  tests/test_grouped_nvfp4_reg.py tests/test_grouped_gpu.py
pack
TAIL=40 step 130 grouped_pairs.log python3 benchmarks/bench_grouped_sweep.py --pairs
pack
TAIL=12 step 230 train_moe.log python3 benchmarks/bench_train.py --models moe-1b --batch 8 \
  --seq 2048 --graph step --recipes bf16,nvfp4,nvfp4@grp-nv-old --steps 6 --warmup 2 \
  --out "$OUT/train_moe.json"
pack
