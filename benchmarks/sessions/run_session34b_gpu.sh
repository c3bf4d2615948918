#!/usr/bin/env bash
# Session 34, call 3 (one H100/H200, ~9 minutes, torchao carried as .whl/): the 50m and 350m
# training tables at the current code, every recipe and torchao float8 in one process per size
# (the README's rows for these sizes dated from session 3's kernels).
#     run: timeout 590 bash benchmarks/sessions/run_session34b_gpu.sh   (carry [".whl"])
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
R=bf16,fp8_tensorwise,fp8_blockwise,mxfp8,mxfp4,nvfp4,nvfp4_no_sr
for m in 50m 350m; do
  TAIL=14 step 285 "train_$m.txt" python3 benchmarks/bench_train.py --graph step --warmup 2 \
    --steps 8 --models "$m" --torchao --recipes "$R" --out "$OUT/train_$m.json"
done
