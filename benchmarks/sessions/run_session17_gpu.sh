#!/usr/bin/env bash
# Session 17, call 1 (one H100): the GPU tests session 16 added after its last call (a dy pair
# wider than 4096 columns, the alpha_epilogue mend), the grouped GPU tests as a baseline, and
# where the moe-1b nvfp4 step's time goes (one profiled step, kernels by name), plus the
# grouped NVFP4 quantizer's timings before its register-layout port.
#     run: timeout 560 bash benchmarks/sessions/run_session17_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s17; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session17.tgz" -C "$OUT" .; }
TAIL=8 step 150 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_expand.py tests/test_gemm_alpha.py tests/test_grouped_gpu.py
pack
TAIL=30 step 80 grouped_quant.log python3 benchmarks/bench_grouped_sweep.py --quant
pack
TAIL=14 step 280 train_moe_profile.log python3 benchmarks/bench_train.py --models moe-1b \
  --batch 8 --seq 2048 --graph step --recipes bf16,nvfp4 --steps 4 --warmup 2 \
  --profile nvfp4 --out "$OUT/train_moe_profile.json"
pack
