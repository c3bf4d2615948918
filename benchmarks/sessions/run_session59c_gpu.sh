#!/usr/bin/env bash
# Session 59, call 3 (one H200, ~8 minutes): the GPU tests of the column views' bf16 pairs and
# of the narrow α tile, verbose so that a cut run still names what passed (calls 1-2 ran out of
# their step time with every finished test passing): the clamp-visible test, the reg pass's
# views, the unclamped column views, the α GEMM's TMA/pointer tests, the relu² MLP's nvfp4 bits;
# then the NVFP4 expanded, recompute and grouped (MoE) GPU tests, which share col_tile.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session59c_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
K="see_the_rht_clamp or reg_pass_e2m1_codes_exact or col_view_unclamped or tma_and_pointer"
K="$K or du_in_dgrad or (cuda_with_the_kernels and nvfp4)"
TAIL=8 step 330 gpu_tests_a.txt python3 -m pytest -v -n 8 -m gpu -rf -p no:cacheprovider \
  tests/test_kernels_quant.py tests/test_gemm_alpha.py tests/test_mlp.py \
  -k "$K"
TAIL=8 step 230 gpu_tests_b.txt python3 -m pytest -v -n 8 -m gpu -rf -p no:cacheprovider \
  tests/test_grouped_nvfp4_reg.py tests/test_recompute.py tests/test_expand.py \
  -k "nvfp4 or grouped_nvfp4"
