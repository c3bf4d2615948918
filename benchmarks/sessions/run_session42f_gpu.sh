#!/usr/bin/env bash
# Session 42, call 6 (one H200, ~8 minutes): Nsight Compute with per-reason stall metrics on
# the MXFP8 pair kernel (x and dy pairs at 16384x3072, 125m's MLP width) and on the NVFP4 row
# kernel's SR codes; then the GPU tests at the session's final defaults (REG_COL PHILOX_WIDE
# on): the expanded views, the NVFP4 quantizer tests, the row kernel at its defaults.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session42f_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
NCU_BIN=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
STALLS="regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
TAIL=4 step 120 ncu_mx.txt "$NCU_BIN" --clock-control none -k regex:mx8_rowcol_reg -c 4 \
  --section SpeedOfLight --section SchedulerStats --section Occupancy --section LaunchStats \
  --section InstructionStats --metrics "$STALLS" \
  python3 benchmarks/ncu_nvfp4.py --shape 16384x3072 --only mx8_x,mx8_dy
TAIL=4 step 90 ncu_row.txt "$NCU_BIN" --clock-control none -k regex:nvfp4_row_kernel -c 4 \
  --section SpeedOfLight --section SchedulerStats --metrics "$STALLS" \
  python3 benchmarks/ncu_nvfp4.py --shape 8192x8192 --only row,row_sr
TAIL=12 step 130 tests_expand.txt python3 -m pytest -q -rfE -m gpu --tb=short --durations=3 \
  tests/test_expand.py
TAIL=12 step 110 tests_quant.txt python3 -m pytest -q -rfE -m gpu --tb=short --durations=3 \
  tests/test_kernels_quant.py -k "rowcol_exact or sr_seeded or amax_pass_skips or unclamped or (reg_pass_matches and shape2)"
TAIL=12 step 80 tests_row.txt python3 -m pytest -q -rfE -m gpu --tb=short --durations=3 \
  tests/test_kernels_nvfp4_row.py -k "gpu_row_kernel and default"
