#!/usr/bin/env bash
# Session 51, call 1 (prepared in session 50, not yet run; one H200, ~9 minutes): issue 11's
# 1b nvfp4 0.9x needs ~2.6 ms of its ~194 ms step (session 50: 0.886x). The NVFP4 amax pass
# took 7.0 ms of it in session 47's profile, reading at an estimated ~55% of the copy rate,
# under a launch chosen on an H100 (3 programs an SM, session 18). Session 50 wrote its RHT's
# last stage as pair maxima (REG_AMAX["PAIRS"], the same bits; offline 158 -> 128 registers,
# so 4 programs an SM fit), off until it has run here. First the amax pass's GPU tests
# (bit-exact against the reference, NaN, huge and Inf values, with and without PAIRS), then the
# pass alone under bench_quant.py's launch configs at the zoo's shapes (same amaxes checked),
# then 1b nvfp4 with PAIRS and launches in one process, bf16 first and last. If PAIRS holds,
# its default goes on (quant_nvfp4_config.py; the grouped amax pass's tile_maxima default too).
#     run (carry [".whl"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session51a_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=4 step 120 gpu_tests.txt python3 -m pytest -q -p no:benchmark -m gpu -n 4 \
  tests/test_kernels_quant.py tests/test_recompute.py -k "amax"
TAIL=70 step 120 amax_pass.txt python3 benchmarks/bench_quant.py --only nvfp4/amax_pass \
  --no-ref --shapes 16384x2048 --sweep --sweep-only nvfp4/amax_pass \
  --sweep-shapes 16384x2048,16384x8192,16384x768,16384x3072,8192x8192
TAIL=10 step 350 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,nvfp4@nv-amax-pairs,nvfp4@nv-amax-pairs-p4,nvfp4@nv-amax-p4,bf16 \
  --out "$OUT/train_1b.json"
