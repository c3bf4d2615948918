#!/usr/bin/env bash
# Session 26, call 5 (one H100): NVFP4's amax pass leaves per-program maxima that the quantize
# launches reduce (quant_nvfp4.CONFIG["AMAX_PARTIALS"]): no zeroed [2] buffer and no copy of
# the column view's amax per quantize call. 125m nvfp4 / nvfp4_no_sr against "@amax-atomic" (the zeroed buffer and
# atomics), one process; then GPU tests of the NVFP4 kernels, the fused MLP, a training step
# without host syncs and its graph replay.
#     run: timeout 590 bash benchmarks/sessions/run_session26e_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s26e; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session26e.tgz" -C "$OUT" .; }
TAIL=8 step 280 train_125m.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m \
  --recipes bf16,nvfp4,nvfp4@amax-atomic,nvfp4_no_sr,nvfp4_no_sr@amax-atomic \
  --out "$OUT/train_125m.json"
pack
TAIL=8 step 200 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_kernels_quant.py tests/test_recompute.py tests/test_mlp.py tests/test_train_gpu.py \
  -k "nvfp4_reg_pass or amax_pass_skips or gpu_rowcol_exact or sr_seeded or (quantize_exact and nvfp4) or (same_bits_on_cuda and nvfp4) or (no_host_sync and nvfp4) or (replays and nvfp4)"
pack
