#!/usr/bin/env bash
# Session 52, call 4 (one H200, ~8 minutes). The RHT's rotated values rounded to bf16 two at
# a time (_rht.finish_rotated_pair: one cvt.rn.bf16x2.f32 for a pair of neighbours): first
# its GPU tests (against torch's casts, and the column views' bit-exact tests), then the
# column views alone with the rounding before (session52_rht_before.py in a copy of src/) and
# after, in two processes; then 1b nvfp4 with REG_COL["RNE"] at 6 programs an SM (call 2:
# 0.8899x against 0.8897x; alone 11% faster), twice each, alternated, bf16 first and last.
#     run (carry [".whl"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session52d_gpu.sh
# Ran at a2e9c78. The pair rounding ran no faster and was reverted (5117231), with its test;
# this script needs that revision (git checkout a2e9c78).
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=3 step 60 test_round.txt python3 -m pytest -q -p no:benchmark tests/test_rht_round.py
TAIL=4 step 150 gpu_tests.txt python3 -m pytest -q -p no:benchmark -m gpu -n 4 \
  tests/test_kernels_quant.py tests/test_kernels_nvfp4_row.py tests/test_grouped_nvfp4_reg.py \
  -k "rht or rowcol or reg or col or sr or pair"
rm -rf /tmp/src_old && cp -r src /tmp/src_old
cp benchmarks/sessions/session52_rht_before.py /tmp/src_old/microscale/kernels/_rht.py
V=nvfp4/col_relu2_exp@amax_given,nvfp4/col_rht_sr_exp@amax_given,nvfp4/col_rht@amax_given
TAIL=12 step 60 cols_before.txt env PYTHONPATH=/tmp/src_old python3 \
  benchmarks/bench_quant.py --no-ref --only $V --shapes 16384x8192,16384x2048
TAIL=12 step 60 cols_after.txt python3 benchmarks/bench_quant.py --no-ref --only $V \
  --shapes 16384x8192,16384x2048
TAIL=10 step 300 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,nvfp4@nv-colrne-p6,nvfp4,nvfp4@nv-colrne-p6,bf16 \
  --out "$OUT/train_1b.json"
