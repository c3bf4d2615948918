#!/usr/bin/env bash
# Session 17, call 4 (the same warm H100): after the register-layout grouped NVFP4 quantizer,
# the MoE ops fwd+bwd (nvfp4), one profiled moe-1b nvfp4 step, and the GPU tests call 2 ran
# out of time on (grouped, expanded views, the dense quantizers whose helpers it shares).
#     run: timeout 580 bash benchmarks/sessions/run_session17d_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s17d; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session17d.tgz" -C "$OUT" .; }
TAIL=20 step 100 moe_ops.log python3 benchmarks/bench_moe.py --no-train --graph --recipes nvfp4
pack
TAIL=6 step 170 train_moe_profile.log python3 benchmarks/bench_train.py --models moe-1b \
  --batch 8 --seq 2048 --graph step --recipes nvfp4 --steps 3 --warmup 1 --profile nvfp4 \
  --out "$OUT/train_moe_profile.json"
pack
TAIL=8 step 290 gpu_tests.log python3 -m pytest -q -p no:cacheprovider --tb=short -m gpu \
  tests/test_grouped_gpu.py tests/test_expand.py tests/test_kernels_quant.py
pack
