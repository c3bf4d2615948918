#!/usr/bin/env bash
# Session 19, call 2 (one H100): the 1b step with the E2M1 value path and every SR dy pair
# split (SPLIT_MIN_COLS 0; @nv-split-wide: split above 4096 columns only, as before), against
# session 18's code (.base/src = git archive f617bc7, carried) in its own process; the
# test_gemm_alpha GPU test whose explain check call 1 found polluted by other tests' entries.
#     run: timeout 590 bash benchmarks/sessions/run_session19b_gpu.sh      (carry: .whl, .base)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s19b; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
BASE="env PYTHONPATH=$PWD/.base/src:/tmp/site"
pack() { tar czf "$REAL_OUT/session19b.tgz" -C "$OUT" .; }
TAIL=6 step 60 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_gemm_alpha.py
pack
T="benchmarks/bench_train.py --models 1b --graph step --steps 6 --warmup 2"
TAIL=10 step 270 train_1b_new.log python3 $T \
  --recipes bf16,nvfp4,nvfp4@nv-split-wide,nvfp4_no_sr,mxfp4 --out "$OUT/train_1b_new.json"
pack
TAIL=9 step 220 train_1b_base.log $BASE python3 $T --recipes bf16,nvfp4,nvfp4_no_sr,mxfp4 \
  --out "$OUT/train_1b_base.json"
pack
