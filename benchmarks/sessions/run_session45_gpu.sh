#!/usr/bin/env bash
# Session 45, calls 1-2 (one H200, ~8 minutes; call 2 at the kernel with its alignment hints): MXFP8 weights quantized together (one launch for
# every W / Wᵀ pair, both expanded: kernels/quant_many_mx), its GPU tests and the 125m step with
# it, without it (@nogroup: one pair kernel a layer, codes the GEMMs decode) and grouped as
# codes (@mx8-w-codes), bf16 first and last; then one profiled mxfp8 step.
#     run: OUT=$OUT timeout 580 bash benchmarks/sessions/run_session45_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=8 step 150 gpu_tests.txt python3 -m pytest -q -m gpu tests/test_weight_cache_mx8.py \
  tests/test_weight_cache.py tests/test_kernels_quant.py -k "many or rowcol_reg or mx_pairs"
TAIL=14 step 240 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m \
  --recipes bf16,mxfp8,mxfp8@nogroup,mxfp8@mx8-w-codes,fp8_blockwise,bf16 \
  --out "$OUT/train_125m.json"
TAIL=6 step 150 profile_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 4 --models 125m --recipes mxfp8 --profile mxfp8 \
  --out "$OUT/profile_125m.json"
