#!/usr/bin/env bash
# Session 18, call 2 (one H100): the two changes of this session on the GPU.
#   1. kernels/_launch.py: persistent quantize kernels launched with no more programs per SM
#      than fit at once (call 1's Nsight Compute: the NVFP4 amax pass at 1.33 waves, the SR
#      rows pass at 2.67); bench_quant with MICROSCALE_FIT_GRID=0 then 1, same process kind.
#   2. nn.function "one weight view": an NVFP4 16x16 weight quantized once, expanded, dgrad
#      reading its transpose in place (gemm_alpha B_KN); its GPU tests, then the 125m step
#      against the old two code views (@w-two-views) and without the fitted grid (@no-fit-grid).
#     run: timeout 590 bash benchmarks/sessions/run_session18b_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s18b; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session18b.tgz" -C "$OUT" .; }
TAIL=6 step 170 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_weight_view.py tests/test_gemm_alpha.py tests/test_expand.py
pack
Q="nvfp4/rowcol_x,nvfp4/rowcol_dy,mxfp8_e4m3/rowcol,fp8_block/1x128_rowcol"
for fit in 0 1; do
  MICROSCALE_FIT_GRID=$fit TAIL=24 step 80 quant_fit$fit.log python3 benchmarks/bench_quant.py \
    --no-ref --only "$Q" --shapes 16384x2048,16384x8192
done
pack
TAIL=12 step 250 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --recipes bf16,nvfp4,nvfp4@w-two-views,nvfp4@no-fit-grid,nvfp4_no_sr,mxfp8 --steps 8 \
  --warmup 2 --out "$OUT/train_125m.json"
pack
