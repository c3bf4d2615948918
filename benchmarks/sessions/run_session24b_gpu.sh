#!/usr/bin/env bash
# Session 24, call 2 (one H100): NVFP4's reg pass and amax pass apply the relu² MLP's
# prologues (relu_square forward, relu_square_grad on the up projection's dy pair), so
# nn.mlp fuses the relu² MLP for nvfp4 / nvfp4_no_sr too. GPU tests of the prologues and the
# fused MLP (bits = the three modules), the reg-pass tests; then the steps, fused against
# "@mlp-unfused" (the three modules) in the same process, 125m and 1b. The FP8 / MXFP8
# pair kernels' prologue tests too: prologue_of (shared) drops its NaN select where the
# hardware conversion keeps NaN.
#     run: timeout 590 bash benchmarks/sessions/run_session24b_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s24b; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session24b.tgz" -C "$OUT" .; }
TAIL=12 step 200 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_recompute.py tests/test_mlp.py tests/test_kernels_quant.py \
  -k "prologue or same_bits_on_cuda or (nvfp4 and reg) or rowcol_reg"
pack
TAIL=8 step 200 train_125m.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes bf16,nvfp4,nvfp4@mlp-unfused,nvfp4_no_sr,nvfp4_no_sr@mlp-unfused \
  --out "$OUT/train_125m.json"
pack
TAIL=8 step 170 train_1b.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 --recipes bf16,nvfp4,nvfp4@mlp-unfused \
  --out "$OUT/train_1b.json"
pack
