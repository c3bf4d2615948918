#!/usr/bin/env bash
# Session 44, call 6 (one H200, ~3 minutes): where the MXFP8 pair kernel stalls, instruction by
# instruction (Nsight Compute source counters: warp-stall samples per SASS line), beside the
# FP8 1x128 pair (67-81% of the copy rate against MXFP8's ~62%), at 16384x3072.
#     run: OUT=$OUT timeout 280 bash benchmarks/sessions/run_session44f_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
NCU_BIN=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
# each variant launches twice (the first compiles): the second of each is profiled
TAIL=6 step 200 ncu_run.txt "$NCU_BIN" --clock-control none \
  -k regex:"mx8_rowcol_reg|fp8_rowcol_reg" --launch-skip 1 -c 5 \
  --section SpeedOfLight --section WarpStateStats --section SourceCounters \
  --section InstructionStats --section SchedulerStats --section Occupancy \
  --import-source no -o "$OUT/pairs" \
  python3 benchmarks/ncu_nvfp4.py --shape 16384x3072 --only mx8_x,mx8_dy,fp8_pair
TAIL=4 step 30 ncu_details.txt "$NCU_BIN" -i "$OUT/pairs.ncu-rep" --page details
TAIL=2 step 30 ncu_source.txt "$NCU_BIN" -i "$OUT/pairs.ncu-rep" --page source --csv \
  --print-source sass
grep -E "rowcol_reg|Duration|Issue Slots Busy|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|Executed Ipc A|Achieved Occupancy|Memory Throughput|DRAM Throughput" \
  "$OUT/ncu_details.txt" | head -60
