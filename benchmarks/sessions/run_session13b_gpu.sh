#!/usr/bin/env bash
# Session 13, call 2: the recomputed MLP input with its op fused into the quantizer's loads
# (op_specs.PROLOGUES: relu²'s square / SwiGLU's product applied by the FP8 1x128 column-only
# register kernel and the tensorwise cast pass, which takes forward's amax), so backward no
# longer writes and reads the bf16 input. Call 1 (unfused) measured at 1b: fp8_blockwise 1.126x
# -> 1.099x with the switch on, fp8_tensorwise 1.214x -> 1.167x; memory 0.863x -> 0.794x.
#     run: timeout 590 bash benchmarks/sessions/run_session13b_gpu.sh          (one H100 or H200)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s13b; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session13b.tgz" -C "$OUT" .; }
TAIL=8 step 150 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_recompute.py tests/test_kernels_quant.py -k "recompute or prologue or column_view_alone"
pack
TAIL=30 step 200 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --recipes bf16,fp8_blockwise,fp8_blockwise@recompute,fp8_tensorwise,fp8_tensorwise@recompute \
  --steps 10 --warmup 3 --out "$OUT/train_1b.json"
pack
TAIL=20 step 120 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --recipes bf16,fp8_blockwise,fp8_blockwise@recompute,fp8_tensorwise,fp8_tensorwise@recompute \
  --steps 12 --warmup 3 --out "$OUT/train_125m.json"
pack
