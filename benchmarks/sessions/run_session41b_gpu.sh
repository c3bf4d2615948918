#!/usr/bin/env bash
# Session 41, call 2 (one H200, ~2 minutes): why the RNE code words packed from the grid bits
# (PACK 2) differ on the GPU and not in the interpreter: a small kernel's pieces on the device,
# the ptxas Triton uses there, and the device's own compile of the row kernel presets.
#     run: OUT=$OUT timeout 300 bash benchmarks/sessions/run_session41b_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
env | grep -i "ptxas\|triton" | tee "$OUT/envvars.txt"
TAIL=80 step 120 debug.txt python3 benchmarks/debug_pack_gpu.py
TAIL=12 step 150 sass_device.txt python3 benchmarks/sass_offline.py nv_row1_rne_now \
  nv_row1_rne_pack nv_row1_sr_now nv_row1_sr_pack --sass "$OUT/sass"
