#!/usr/bin/env bash
# Session 8, second call: GPU tests of the column-major FP8 1x128 scales and of the many-weight
# FP8 launch; the 125m step with the FP8 recipes, weights grouped or not (fp8_blockwise@nogroup)
# and a profile; the GEMM path sweep again, now timed from CUDA graphs (the first call's eager
# timings were host-bound at the small shapes). Back: $OUT/session8b.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=8 step "${TEST_SECS:-120}" gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_weight_cache.py tests/test_kernels_quant.py tests/test_linear.py \
  -k "fp8 or many or rowcol or blockwise"
TAIL=12 step "${TRAIN_SECS:-220}" train_125m.log python3 benchmarks/bench_train.py \
  --models 125m --recipes bf16,fp8_blockwise,fp8_blockwise@nogroup,fp8_tensorwise,mxfp8 \
  --graph step --steps 10 --warmup 2 --profile fp8_blockwise --out "$OUT/train_125m.json"
TAIL=30 step "${SWEEP_SECS:-180}" gemm_sweep.log python3 benchmarks/bench_gemm_sweep.py --quick \
  --models 125m,1b --families fp8,fp4 --out "$OUT/gemm_table_suggested.json"
pack_out session8b.tgz
