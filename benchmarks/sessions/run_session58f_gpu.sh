#!/usr/bin/env bash
# Session 58, call 6 (one H200, ~3 minutes): GPU tests after the subnormal cases: the row
# kernel's (a tensor of bf16 subnormals, rotated and not, against the CPU reference: its amax
# from the v3 pass, whose RHT runs on bf16 tensor cores) and the edge-value properties of the
# NVFP4 cases on the real kernels (the RHT'd row codes among them).
#     run: OUT=$OUT timeout 400 bash benchmarks/sessions/run_session58f_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step 200 gpu_row.txt python3 -m pytest -q -n 4 -m gpu -p no:cacheprovider \
  tests/test_kernels_nvfp4_row.py -k gpu_row_kernel
TAIL=12 step 170 gpu_props.txt python3 -m pytest -q -n 4 -m gpu -p no:cacheprovider \
  tests/test_properties.py -k nvfp4
