#!/usr/bin/env bash
# Session 26, call 1 (one H100): NVFP4 16x16 weights quantized all at once per step
# (kernels/quant_many_nvfp4.py: two launches for every weight, each W written once expanded;
# ms.weight_cache, which bench_train uses where weights are small). GPU tests of the
# many-tensor kernels against the per-tensor kernels and the reference at the 125m/1b weight
# shapes, a training step without host syncs / replayed from a CUDA graph; then 125m nvfp4 and
# nvfp4_no_sr against "@nogroup" (each weight in its layer's call, as before), one process,
# with one profiled nvfp4 step.
#     run: timeout 590 bash benchmarks/sessions/run_session26_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s26; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session26.tgz" -C "$OUT" .; }
TAIL=8 step 240 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_weight_cache.py tests/test_train_gpu.py \
  -k "many_kernel or (no_host_sync and nvfp4) or replays_the_training_step or grouped_weight_step"
pack
TAIL=8 step 320 train_125m.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --profile nvfp4 \
  --recipes bf16,nvfp4,nvfp4@nogroup,nvfp4_no_sr,nvfp4_no_sr@nogroup \
  --out "$OUT/train_125m.json"
pack
