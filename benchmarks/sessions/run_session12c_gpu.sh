#!/usr/bin/env bash
# Session 12, call 4 (one GPU, the session's last ~400 s of device time): the MLP's down
# projection keeps the activation's sources instead of its quantized input's column view
# (microscale.nn.recompute; call 3's bench_memory.py showed that view as the largest item an
# FP8 step keeps beyond bf16's). (1) GPU tests: the recompute path's bits with the kernels,
# the compiled model against eager, a compiled no-sync step and a graph replay; (2) 1b and
# 125m speed and peak memory, whole step in one CUDA graph, recompute on (default) and off
# (@keepview).
#     run: timeout 380 bash benchmarks/sessions/run_session12c_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s12c; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session12c.tgz" -C "$OUT" .; }
TAIL=8 step 80 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_recompute.py tests/test_train_gpu.py \
  -k "recompute or (inductor_layer_bit_exact and (fp8_blockwise or nvfp4)) or no_host_sync[fp8_blockwise-True]"
pack
TAIL=30 step 190 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --recipes bf16,fp8_blockwise,fp8_blockwise@keepview,fp8_tensorwise,fp8_tensorwise@keepview \
  --steps 10 --warmup 3 --out "$OUT/train_1b.json"
pack
TAIL=20 step 90 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --recipes bf16,fp8_blockwise,fp8_blockwise@keepview --steps 12 --warmup 3 --out "$OUT/train_125m.json"
pack
