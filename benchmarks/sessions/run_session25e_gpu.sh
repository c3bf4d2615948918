#!/usr/bin/env bash
# Session 25, call 5 (one H100): the default now splits NVFP4 x pairs at most 1024 wide
# (quant_nvfp4.CONFIG["SPLIT_X_MAX_COLS"]). GPU tests of the split x pair (alone, with the
# relu² prologues, in the fused MLP, a training step without host syncs, graph replay of the
# step, MXFP8's recompute under those too); then 125m nvfp4 / nvfp4_no_sr against
# "@nv-split-x-off" (one launch at every width) in one process.
#     run: timeout 590 bash benchmarks/sessions/run_session25e_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s25e; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session25e.tgz" -C "$OUT" .; }
TAIL=8 step 300 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_expand.py tests/test_recompute.py tests/test_mlp.py tests/test_train_gpu.py \
  -k "x_pair_split or nvfp4_prologues or (same_bits_on_cuda and (nvfp4 or mxfp8)) or no_host_sync or replays_the_training_step"
pack
TAIL=8 step 250 train_125m.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m \
  --recipes bf16,nvfp4,nvfp4@nv-split-x-off,nvfp4_no_sr,nvfp4_no_sr@nv-split-x-off \
  --out "$OUT/train_125m.json"
pack
