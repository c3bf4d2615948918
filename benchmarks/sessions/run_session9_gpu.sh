#!/usr/bin/env bash
# Next session's first call (written in session 8, not yet run): the GPU tests session 8's
# first call did not reach (NVFP4 reg pass shapes incl. (1008, 80), the nvfp4 layers), the
# many-weight launch against per-weight launches with a config sweep, and the grouped MoE
# FP8/MXFP8 pair path (kernels/grouped.py CONFIG PAIR) against the default in two processes.
# Back: $OUT/session9.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=8 step "${TEST_SECS:-150}" gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  --tb=short tests/test_kernels_quant.py tests/test_linear.py tests/test_grouped_gpu.py \
  -k "nvfp4_reg_pass_matches or (cuda_layer_matches_cpu_reference and nvfp4) or grouped"
TAIL=20 step "${MANY_SECS:-90}" many.log python3 benchmarks/bench_many.py --sweep
TAIL=12 step "${MOE_SECS:-120}" moe_default.log python3 benchmarks/bench_moe.py --no-train \
  --graph --recipes fp8_blockwise,mxfp8
TAIL=12 step "${MOE_SECS:-120}" moe_pair.log env MICROSCALE_GROUPED_PAIR=1 \
  python3 benchmarks/bench_moe.py --no-train --graph --recipes fp8_blockwise,mxfp8
pack_out session9.tgz
