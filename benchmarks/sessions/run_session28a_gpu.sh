#!/usr/bin/env bash
# Next session, call 1 (one H100, ~9 minutes): session 27's untimed work.
# 1. GPU tests of the relu² MLP's du written by the down projection's dgrad GEMM (gemm_alpha's
#    epilogue op: TMA and pointer kernels at the 125m / 1b dgrad shapes, the layer's bits), and
#    of the expanded NVFP4 row views' NaN-kept block maxima (EXP_NAN_MAX, opt-in since session
#    27: interpreter tests and offline SASS alone);
# 2. 125m nvfp4 / nvfp4_no_sr with "@du-epi" (nn.mlp DU_IN_DGRAD on) and nvfp4 with
#    "@exp-nan-max" in one process, and mxfp8's +2.1% of session 27 split between its two
#    changes (@no-decode-op, @no-share-amax).
# If the tests pass and @du-epi / @exp-nan-max win, turn DU_IN_DGRAD / EXP_NAN_MAX on by
# default and time 1b the same way.
#     run: timeout 590 bash benchmarks/sessions/run_session28a_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s28a; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session28a.tgz" -C "$OUT" .; }
TAIL=12 step 200 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider -rA \
  tests/test_gemm_alpha.py tests/test_mlp.py tests/test_expand.py \
  -k "epilogue_tma_and_pointer or du_in_dgrad or nan_max or expanded_views_match"
pack
TAIL=10 step 370 train_125m.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m \
  --recipes bf16,nvfp4,nvfp4@du-epi,nvfp4@exp-nan-max,nvfp4_no_sr@du-epi,nvfp4_no_sr,mxfp8,mxfp8@no-decode-op,mxfp8@no-share-amax \
  --out "$OUT/train_125m.json"
pack
