#!/usr/bin/env bash
# Session 53, call 6 (one H200, ~5 minutes: the budget's last ~420 s). Call 5's nvfp4 rows
# failed in CUDA graph capture: the up projection's fprop asked for relu(u)²'s amaxes without
# an epilogue op, the op passed no hint to the kernel, and measured them after the GEMM by the
# reference, whose RHT matrix is a host copy. Fixed (ops_gemm: the request travels alone too;
# a CPU test now fails if any amax is measured after a GEMM). The MLP's GPU tests (now
# asserting both requests reach the α kernel), then 1b training, both on against both off.
#     run (carry [".whl"]): OUT=$OUT timeout 295 bash benchmarks/sessions/run_session53f_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=4 step 90 gpu_tests.txt python3 -m pytest -q -p no:benchmark -m gpu tests/test_mlp.py \
  -k "gpu_du_in_dgrad"
TAIL=7 step 190 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4@gemm-amax-off,nvfp4,bf16 --out "$OUT/train_1b.json"
