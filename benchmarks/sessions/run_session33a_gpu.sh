#!/usr/bin/env bash
# Next session, call 1 (one H100/H200, ~8 minutes): what session 32 left untested on the GPU
# (its device budget ran out): every NVFP4 reg-pass and row-kernel GPU test at the session's
# last defaults (REG_COL["RNE"]: a round-to-nearest column view alone at 4 programs an SM; the
# row kernel's RHT), with room for cold compile caches; then the 125m nvfp4 step against the
# base column tile once more.
#     run: timeout 590 bash benchmarks/sessions/run_session33a_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=6 step 420 tests.txt python3 -m pytest -q -m gpu tests/test_kernels_quant.py \
  tests/test_kernels_nvfp4_row.py -k "nvfp4 or row_kernel"
TAIL=8 step 150 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes bf16,nvfp4,nvfp4@col-rne-base,nvfp4
