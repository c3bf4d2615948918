#!/usr/bin/env bash
# Session 19, call 3 (one H100): nvfp4_no_sr's dy pairs split too (SPLIT_EXP_COL; label
# @nv-nosplit-expcol: the rows pass / reg pass + decode, as before); the expanded views' GPU
# tests (the no-SR split included); the 125m step (@nv-split-wide: SR dy pairs split above
# 4096 columns only, as before call 2), the 1b no-SR step and a profile of the 1b nvfp4 step.
#     run: timeout 590 bash benchmarks/sessions/run_session19c_gpu.sh      (carry: .whl)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s19c; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session19c.tgz" -C "$OUT" .; }
TAIL=6 step 100 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_expand.py tests/test_e2m1_values.py
pack
TAIL=10 step 150 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --recipes bf16,nvfp4,nvfp4@nv-split-wide,nvfp4_no_sr,nvfp4_no_sr@nv-nosplit-expcol,mxfp4 \
  --steps 8 --warmup 2 --out "$OUT/train_125m.json"
pack
TAIL=8 step 150 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --recipes bf16,nvfp4_no_sr,nvfp4_no_sr@nv-nosplit-expcol --steps 6 --warmup 2 \
  --out "$OUT/train_1b.json"
pack
TAIL=14 step 160 train_1b_profile.log python3 benchmarks/bench_train.py --models 1b \
  --graph step --recipes bf16,nvfp4 --steps 6 --warmup 2 --profile nvfp4 \
  --out "$OUT/train_1b_profile.json"
pack
