#!/usr/bin/env bash
# Session 44, call 7 (one H200, ~2 minutes): call 6 found the MXFP8 x pair's warps stalled on
# their global loads (long scoreboard at the first use of the loaded words, 44-49% of the
# samples; the FP8 pair at 3 stages 15%); the same source counters with the tile loop staged
# through shared memory (NUM_STAGES_reg 2 and 3), which session 43 timed level: where do the
# stalls go?
#     run: OUT=$OUT timeout 230 bash benchmarks/sessions/run_session44g_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
NCU_BIN=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for s in 1 2 3; do
  TAIL=3 step 80 ncu_run_s$s.txt "$NCU_BIN" --clock-control none -k regex:mx8_rowcol_reg \
    --launch-skip 1 -c 1 --section SpeedOfLight --section WarpStateStats \
    --section SourceCounters --section Occupancy --import-source no -o "$OUT/mx_x_s$s" \
    python3 benchmarks/ncu_nvfp4.py --shape 16384x3072 --only mx8_x --kernels mx8-s$s
  "$NCU_BIN" -i "$OUT/mx_x_s$s.ncu-rep" --page details > "$OUT/ncu_details_s$s.txt" 2>&1
  "$NCU_BIN" -i "$OUT/mx_x_s$s.ncu-rep" --page source --csv --print-source sass \
    > "$OUT/ncu_source_s$s.txt" 2>&1
  python3 benchmarks/ncu_stalls.py "$OUT/ncu_source_s$s.txt" --top 8 | tee "$OUT/stalls_s$s.txt" \
    | cut -c1-160
  gzip -f "$OUT/ncu_source_s$s.txt"; rm -f "$OUT/mx_x_s$s.ncu-rep"
  grep -E "Duration|No Eligible|Active Warps Per Scheduler|Eligible Warps|Warp Cycles Per Issued|DRAM Throughput" \
    "$OUT/ncu_details_s$s.txt"
done
