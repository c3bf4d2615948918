#!/usr/bin/env bash
# Session 15, call 6 (one H100 or H200): every recipe at 1b in one process with the session's
# code (FP8 recipes now recompute the MLP down projection's wgrad input by default), torchao
# float8 tensorwise and rowwise as the peers; GPU tests of the recompute switch.
#     run: timeout 570 bash benchmarks/sessions/run_session15f_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s15f; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session15f.tgz" -C "$OUT" .; }
TAIL=8 step 70 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_recompute.py
pack
TAIL=16 step 470 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --recipes bf16,fp8_tensorwise,fp8_blockwise,mxfp8,mxfp4,nvfp4,nvfp4_no_sr --torchao \
  --steps 8 --warmup 2 --out "$OUT/train_1b.json"
pack
