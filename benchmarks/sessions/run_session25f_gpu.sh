#!/usr/bin/env bash
# Session 25, call 7 (one H100): the one-launch NVFP4 x pair (inputs wider than 1024: 125m's
# 3072-wide down projection input, 1b's 2048 / 8192) on other tiles of quant_nvfp4.CONFIG
# ["REG"]: "@nv-reg-bc32" ([256, 32]) and "@nv-reg-w8" (8 warps, one program an SM), both
# without the default's register spill (offline SASS); GPU bit test of each first.
#     run: timeout 590 bash benchmarks/sessions/run_session25f_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s25f; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session25f.tgz" -C "$OUT" .; }
TAIL=6 step 150 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_expand.py -k "x_pair_one_launch_tiles"
pack
TAIL=8 step 200 train_1b.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 --recipes bf16,nvfp4,nvfp4@nv-reg-bc32,nvfp4@nv-reg-w8 \
  --out "$OUT/train_1b.json"
pack
TAIL=8 step 180 train_125m.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes bf16,nvfp4,nvfp4@nv-reg-bc32,nvfp4@nv-reg-w8 \
  --out "$OUT/train_125m.json"
pack
