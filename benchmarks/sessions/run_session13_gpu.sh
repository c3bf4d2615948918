#!/usr/bin/env bash
# Next session's first call (written in session 12, not yet run): time the recompute switch
# (ms.Linear.recompute_input) now that the FP8 1x128 column view alone goes through the
# register kernel (WRITE_ROW=False) instead of a transposed copy. Session 12's call 4 measured,
# with the copy, 1b fp8_blockwise 1.128x -> 0.987x of bf16 with the switch on (memory 0.865x ->
# 0.793x) and fp8_tensorwise 1.197x -> 1.178x (0.864x -> 0.794x). If blockwise now costs about
# what tensorwise does, the switch can go on by default for FP8 (issue 11's memory target).
#     run: timeout 590 bash benchmarks/sessions/run_session13_gpu.sh          (one H100 or H200)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s13; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session13.tgz" -C "$OUT" .; }
TAIL=8 step 150 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_recompute.py tests/test_kernels_quant.py tests/test_train_gpu.py \
  -k "recompute or column_view_alone or (inductor_layer_bit_exact and (fp8_blockwise or nvfp4)) or no_host_sync[fp8_blockwise-True]"
pack
TAIL=30 step 240 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --recipes bf16,fp8_blockwise,fp8_blockwise@recompute,fp8_tensorwise,fp8_tensorwise@recompute,mxfp8,mxfp8@recompute \
  --steps 10 --warmup 3 --out "$OUT/train_1b.json"
pack
TAIL=20 step 120 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --recipes bf16,fp8_blockwise,fp8_blockwise@recompute,fp8_tensorwise,fp8_tensorwise@recompute \
  --steps 12 --warmup 3 --out "$OUT/train_125m.json"
pack
