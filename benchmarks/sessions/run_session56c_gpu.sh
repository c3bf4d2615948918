#!/usr/bin/env bash
# Session 56, call 3 (one H200, ~9 minutes). Small NVFP4 16x16 weights are grouped by default
# since this session (nn.weight_cache GROUP_FORMATS; call 1: 125m +0.9% with @nv-group), yet
# call 2's 125m nvfp4 row read like per-layer weights (48.27 ms; grouped 47.86-47.88 in call
# 1). Rows now say whether they ran grouped (bench_train's "grouped"). The default against
# @nogroup (the weights one by one, as before), alternated twice, at 125m and 350m (mean
# weight under GROUP_MAX_MEAN_NUMEL; 1b is over it), then 50m once.
#     run (carry [".whl"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session56c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
ab() {  # ab MODEL SECS REPEAT
  TAIL=12 step "$2" "train_$1.txt" python3 benchmarks/bench_train.py --graph step --warmup 2 \
    --models "$1" --recipes bf16,nvfp4,nvfp4@nogroup,bf16 --repeat "$3" --out "$OUT/train_$1.json"
}
ab 125m 220 2
ab 350m 240 2
ab 50m 110 1
