#!/usr/bin/env bash
# Session 22, call 3 (one H100): the 128x128 weight pair fixed (call 2's version, one FP8
# conversion stored both ways, wrote ~40% of Wᵀ's bytes wrong with NAN_SEL off): GPU tests,
# the pair's launch sweep, the 1b step with both of this session's changes A/B'd in one process.
#     run: timeout 590 bash benchmarks/sessions/run_session22c_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s22c; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session22c.tgz" -C "$OUT" .; }
TAIL=8 step 150 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_kernels_quant.py tests/test_mlp.py tests/test_fp8.py tests/test_weight_cache.py \
  -k "weight_pair_reg or gpu_rowcol_exact or rowcol_reg_exact or cuda or gpu"
pack
TAIL=14 step 100 quant_sweep_w128.log python3 benchmarks/bench_quant.py --sweep --sweep-only \
  fp8_block/128x128_rowcol_fp32 --sweep-shapes 8192x2048,2048x8192 --only fp8_block/128x128_rowcol_fp32 \
  --shapes 8192x2048,2048x8192
pack
TAIL=12 step 300 train_1b_ab.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --models 1b --steps 6 --recipes bf16,fp8_blockwise,fp8_blockwise@fp8w-tile,fp8_blockwise@mlp-unfused,fp8_tensorwise \
  --out "$OUT/train_1b_ab.json"
pack
