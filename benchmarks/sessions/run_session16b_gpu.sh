#!/usr/bin/env bash
# Session 16, call 2 (one H100 or H200): α made from the two amaxes inside the epilogue GEMM
# (no small kernels before it), its 128x256 tile for every N; the NVFP4 amax pass letting the
# GPU's max.f32 skip NaN (A/B: `@nv-amax-nansel`); the every-recipe rows at 125m and 1b.
#     run: timeout 570 bash benchmarks/sessions/run_session16b_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s16b; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session16b.tgz" -C "$OUT" .; }
TAIL=8 step 100 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_gemm_alpha.py tests/test_kernels_quant.py -k "alpha or epilogue or amax_pass or reg_pass"
pack
TAIL=12 step 170 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --recipes bf16,nvfp4,nvfp4@nv-amax-nansel,nvfp4_no_sr,mxfp4,mxfp8 --steps 12 --warmup 3 \
  --profile nvfp4 --out "$OUT/train_125m.json"
pack
TAIL=10 step 200 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --recipes bf16,nvfp4,nvfp4@nv-amax-nansel,nvfp4_no_sr --steps 8 --warmup 2 \
  --out "$OUT/train_1b.json"
pack
