#!/usr/bin/env bash
# Session 18, call 5 (one H100): the MoE experts' one weight view (nn.grouped
# ONE_WEIGHT_VIEW: W quantized once, expanded; dgrad's grouped GEMM reads the experts'
# transposes in place). Its GPU tests and the MoE step's no-sync test for nvfp4, then the
# moe-1b step against two code views (@grp-w-two-views).
#     run: timeout 590 bash benchmarks/sessions/run_session18e_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s18e; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session18e.tgz" -C "$OUT" .; }
TAIL=6 step 170 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_grouped_weight_view.py tests/test_grouped_gpu.py -k "one_view or (no_host_sync and nvfp4)"
pack
TAIL=10 step 320 train_moe.log python3 benchmarks/bench_train.py --models moe-1b --batch 8 \
  --seq 2048 --graph step --recipes bf16,nvfp4,nvfp4@grp-w-two-views --steps 6 --warmup 2 \
  --out "$OUT/train_moe.json"
pack
