#!/usr/bin/env bash
# Session 32, call 10 (one H100/H200, ~3 minutes): issue 12's ms.Linear figures (16384 tokens,
# 4096 -> 14336, forward + backward against bf16 nn.Linear) at this session's defaults (the
# reg pass's FAST_E2M1 on), last measured in session 27, and the rows RNE + columns RHT+SR pair.
#     run: timeout 300 bash benchmarks/sessions/run_session32i_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=14 step 200 bench_linear.txt python3 benchmarks/bench_linear.py \
  --recipes nvfp4,nvfp4_no_sr,mxfp8,fp8_blockwise,fp8_tensorwise
TAIL=30 step 120 quant_targets.txt python3 benchmarks/bench_quant.py --no-ref \
  --shapes 8192x8192,16384x4096 --only nvfp4/col_rht,nvfp4/rowcol_rne_rhtsr
