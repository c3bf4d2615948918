#!/usr/bin/env bash
# Session 51, call 7 (one H200, ~3 minutes): the grouped (MoE) NVFP4 amax pass with its RHT
# ending in pair maxima (quant_nvfp4_grouped_reg.CONFIG["AMAX_PAIRS"], off), against the
# PyTorch twin with a NaN and 3e38, RNE and SR, on and off; then the grouped quantizers'
# CUDA bit-exact test at the default. If it passes, AMAX_PAIRS goes on as the dense pass's did.
#     run (carry [".whl"]): OUT=$OUT timeout 250 bash benchmarks/sessions/run_session51g_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=6 step 220 tests.txt python3 -m pytest -q -p no:benchmark -rxXs \
  "tests/test_grouped_nvfp4_reg.py::test_amax_pairs_same_bits" \
  "tests/test_grouped_gpu.py::test_sync_free_quantizer_bit_exact_on_cuda[nvfp4]"
