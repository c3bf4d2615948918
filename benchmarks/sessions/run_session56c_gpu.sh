#!/usr/bin/env bash
# Session 56, call 3 (one H200, ~9 minutes). Small NVFP4 16x16 weights are grouped by default
# since this session (nn.weight_cache GROUP_FORMATS, measured at 125m: +0.9%); the other sizes
# it now applies to, 50m and 350m (mean weight under GROUP_MAX_MEAN_NUMEL; 1b is over it), with
# the default against @nogroup (the weights one by one, as before), alternated twice.
#     run (carry [".whl"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session56c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
for m in 50m 350m; do
  TAIL=12 step $([ $m = 50m ] && echo 200 || echo 340) "train_$m.txt" python3 \
    benchmarks/bench_train.py --graph step --warmup 2 --models $m \
    --recipes bf16,nvfp4,nvfp4@nogroup,bf16 --repeat 2 --out "$OUT/train_$m.json"
done
