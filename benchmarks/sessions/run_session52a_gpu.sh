#!/usr/bin/env bash
# Session 52, call 1 (prepared in session 51, not yet run: too little device time was left;
# one H200, ~2.5 minutes): Nsight Compute on the NVFP4 quantize launches of one 1b MLP (d 2048,
# hidden 8192, 16384 tokens, nvfp4), forward + backward as training runs them
# (benchmarks/ncu_mlp_block.py). Session 51's call 2 put half of 1b nvfp4's quantize time on
# the MLP's 16384x8192 tensors (column views ~253 us a launch). Per launch: duration, DRAM
# throughput, occupancy, registers, warp stall reasons, instruction mix and the source
# counters' hottest SASS lines; profile before optimizing.
#     run (carry [".whl"]): OUT=$OUT timeout 160 bash benchmarks/sessions/run_session52a_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
NCU_BIN=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
TAIL=4 step 140 ncu_run.txt "$NCU_BIN" --clock-control none --profile-from-start off \
  -k regex:"nvfp4_(rowcol_reg|row|amax_reg)_kernel" --section SpeedOfLight \
  --section Occupancy --section LaunchStats --section WarpStateStats \
  --section InstructionStats --section SourceCounters -o "$OUT/mlp" \
  python3 benchmarks/ncu_mlp_block.py --model 1b --recipe nvfp4
"$NCU_BIN" -i "$OUT/mlp.ncu-rep" --page details > "$OUT/ncu_details.txt" 2>&1
"$NCU_BIN" -i "$OUT/mlp.ncu-rep" --page raw --csv > "$OUT/ncu_raw.csv" 2>&1; gzip -f "$OUT/ncu_raw.csv"
gzip -f "$OUT/mlp.ncu-rep"
grep -E "nvfp4_|Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Grid Size|Warp Cycles Per Issued|[Ss]tall" \
  "$OUT/ncu_details.txt" | head -150 > "$OUT/ncu_summary.txt"
tail -40 "$OUT/ncu_summary.txt"
