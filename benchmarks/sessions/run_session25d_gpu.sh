#!/usr/bin/env bash
# Session 25, call 4 (one H100): NVFP4's x pair (row view RNE expanded, column view RHT) as
# two reg-pass launches ("@nv-split-x", quant_nvfp4.CONFIG["SPLIT_X"]) against the one launch
# (255 registers + a spill, 2 programs an SM), same process; a profile of each at 125m. GPU
# test of the split pair's bits first.
#     run: timeout 590 bash benchmarks/sessions/run_session25d_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s25d; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session25d.tgz" -C "$OUT" .; }
TAIL=6 step 120 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_expand.py -k "x_pair_split"
pack
TAIL=10 step 250 train_125m.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --profile nvfp4,nvfp4@nv-split-x \
  --recipes bf16,nvfp4,nvfp4@nv-split-x,nvfp4_no_sr,nvfp4_no_sr@nv-split-x \
  --out "$OUT/train_125m.json"
pack
TAIL=8 step 190 train_1b.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 --recipes bf16,nvfp4,nvfp4@nv-split-x \
  --out "$OUT/train_1b.json"
pack
