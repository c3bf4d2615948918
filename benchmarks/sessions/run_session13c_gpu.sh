#!/usr/bin/env bash
# Session 13, call 3: an FP8 1x128 row view alone through the register kernel (WRITE_COL=False)
# instead of the older row kernel, which ran at ~37% of the copy rate: with the recompute switch
# on, forward quantizes only x's row view, and call 2 measured fp8_blockwise still paying 2.7%
# at 1b (tensorwise 1.3% with its op fused). Plus every recipe at 1b and 125m in one process.
#     run: timeout 590 bash benchmarks/sessions/run_session13c_gpu.sh          (one H100 or H200)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s13c; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session13c.tgz" -C "$OUT" .; }
TAIL=8 step 100 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_recompute.py tests/test_kernels_quant.py \
  -k "view_alone or (same_bits_on_cuda and fp8) or rowcol_reg_exact"
pack
TAIL=30 step 260 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --recipes bf16,fp8_blockwise,fp8_blockwise@recompute,fp8_tensorwise,fp8_tensorwise@recompute,mxfp8,nvfp4 \
  --steps 10 --warmup 3 --out "$OUT/train_1b.json"
pack
TAIL=20 step 150 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --recipes bf16,fp8_blockwise,fp8_blockwise@recompute,fp8_tensorwise,fp8_tensorwise@recompute,mxfp8,mxfp4,nvfp4 \
  --steps 12 --warmup 3 --out "$OUT/train_125m.json"
pack
