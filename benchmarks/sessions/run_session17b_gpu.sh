#!/usr/bin/env bash
# Session 17, call 2 (one H100): the register-layout grouped NVFP4 quantizer
# (kernels/quant_nvfp4_grouped_reg.py): its tests on CUDA (and the dense reg kernel's, whose
# column view and row-scale store it now shares), the moe-1b pairs old vs new and a few tiles,
# and the moe-1b step with it against the older grouped kernels (@grp-nv-old).
#     run: timeout 560 bash benchmarks/sessions/run_session17b_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s17b; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session17b.tgz" -C "$OUT" .; }
TAIL=8 step 60 gpu_tests_reg.log python3 -m pytest -q -p no:cacheprovider --tb=short \
  tests/test_grouped_nvfp4_reg.py
TAIL=8 step 180 gpu_tests.log python3 -m pytest -q -p no:cacheprovider --tb=short -m gpu \
  tests/test_grouped_gpu.py tests/test_expand.py tests/test_kernels_quant.py
pack
TAIL=40 step 100 grouped_pairs.log python3 benchmarks/bench_grouped_sweep.py --pairs
pack
TAIL=12 step 230 train_moe.log python3 benchmarks/bench_train.py --models moe-1b --batch 8 \
  --seq 2048 --graph step --recipes bf16,nvfp4,nvfp4@grp-nv-old --steps 6 --warmup 2 \
  --out "$OUT/train_moe.json"
pack
