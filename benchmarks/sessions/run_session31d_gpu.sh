#!/usr/bin/env bash
# Session 31, call 4 (one H100/H200, ~9 minutes): a split NVFP4 pair's two reg-pass launches
# on two streams (quant_nvfp4.CONFIG["SPLIT_CONCURRENT"]): GPU tests (bits against the
# sequential launches, eager and graph-replayed, no host sync), the graph-replayed pair
# times per programs-an-SM split, and the 125m nvfp4 step sequential / concurrent in one
# process.
#     run: timeout 590 bash benchmarks/sessions/run_session31d_gpu.sh   (at 80def88: the code it
# measures was reverted after this call, 605fc36)
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=6 step 150 tests.txt python3 -m pytest -q -m gpu tests/test_expand.py -x
TAIL=70 step 150 quant_split.txt python3 benchmarks/bench_quant.py --only nvfp4/rowcol_dy \
  --shapes 16384x768 --no-ref --sweep --sweep-shapes 16384x768,16384x2048,16384x8192 \
  --sweep-only nvfp4/rowcol_dy,nvfp4/rowcol_x
TAIL=12 step 270 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m \
  --recipes bf16,nvfp4@split-seq,nvfp4@split-conc,nvfp4@split-conc23,nvfp4@split-seq,nvfp4_no_sr@split-seq,nvfp4_no_sr@split-conc
