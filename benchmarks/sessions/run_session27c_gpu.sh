#!/usr/bin/env bash
# Session 27, call 3 (one H100): call 2's nvfp4 runs failed to trace (torch 2.11's dynamo has no
# bool() of a tuple holding a tensor, in ops._shares_col_amax; fixed). 125m nvfp4 against "@s26"
# (DECODE_XT_OP and SHARE_COL_AMAX off) and "@amax-atomic" in one process; then the GPU tests
# call 2's time limit cut.
#     run: timeout 590 bash benchmarks/sessions/run_session27c_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s27c; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session27c.tgz" -C "$OUT" .; }
TAIL=8 step 250 train_125m.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes bf16,nvfp4,nvfp4@s26,nvfp4@amax-atomic \
  --out "$OUT/train_125m.json"
pack
TAIL=12 step 290 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider -rA \
  tests/test_kernels_quant.py tests/test_expand.py tests/test_train_gpu.py \
  -k "nvfp4_reg_pass_matches or layer_with_expansion or (no_host_sync and (mxfp8 or nvfp4-True)) or (gpu_rowcol_exact and bf16)"
pack
