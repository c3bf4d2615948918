#!/usr/bin/env bash
# Prepared in session 59 for the next session's first call (one H200, ~6 minutes): the SR codes'
# random bytes placed by a byte permute (quant_nvfp4.CONFIG["ROW1"]["SR_PRMT"], off by default;
# _e2m1._sr_sum with rpos). Its GPU tests (the E2M1 word-byte test against the library's
# encoder, the row kernel at sr-prmt and its default), then the SR codes with it off and on,
# alternated twice (bench_quant --sweep-with SR_PRMT, graph-replayed, amax given), at 8192²
# and 16384x4096. Turn it on if it is faster and the tests pass.
#     run: OUT=$OUT timeout 560 bash benchmarks/sessions/run_session60a_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=8 step 280 gpu_tests.txt python3 -m pytest -v -n 6 -m gpu -rf -p no:cacheprovider \
  tests/test_e2m1_values.py tests/test_kernels_nvfp4_row.py -k "word_byte or sr-prmt or default"
TAIL=14 step 200 sweep_prmt.txt python3 benchmarks/bench_quant.py --no-ref --sweep \
  --sweep-with SR_PRMT --sweep-shapes 8192x8192,16384x4096 --shapes 8192x8192 \
  --only nvfp4/1x16_sr@amax_given
