#!/usr/bin/env bash
# Session 27, call 2 (one H100): wgrad's kept xT decoded by its own op (nn.function
# DECODE_XT_OP: q/k/v's shared xT decoded once under torch.compile) and MX / FP8 blockwise pairs
# returning their amax once (ops.SHARE_COL_AMAX: no copy per pair). 125m nvfp4 and mxfp8 against
# "@s26" (both off) in one process, and nvfp4 against "@amax-atomic" (session 26's owed A/B);
# then GPU tests: the one-launch NVFP4 reg pass (test fixed: SPLIT off), the expanded-operand
# layers, MX/FP8 pairs, training steps without host syncs, graph replay, Inductor.
#     run: timeout 590 bash benchmarks/sessions/run_session27b_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s27b; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session27b.tgz" -C "$OUT" .; }
TAIL=10 step 340 train_125m.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m \
  --recipes bf16,nvfp4,nvfp4@s26,nvfp4@amax-atomic,mxfp8,mxfp8@s26 \
  --out "$OUT/train_125m.json"
pack
TAIL=12 step 230 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider -rfE \
  tests/test_kernels_quant.py tests/test_expand.py tests/test_train_gpu.py \
  -k "nvfp4_reg_pass_matches or gpu_rowcol_exact or layer_with_expansion or (no_host_sync and (mxfp8 or nvfp4)) or (replays and mxfp8) or (inductor_layer and mxfp8)"
pack
