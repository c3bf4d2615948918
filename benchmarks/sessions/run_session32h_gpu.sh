#!/usr/bin/env bash
# Session 32, call 9 (one H100/H200, ~3 minutes): Nsight Compute on the NVFP4 row kernel, the
# 1x16 RNE and SR views written as codes at 8192² (amax given): instructions executed, issue
# and pipe utilisation, DRAM throughput, warp stall reasons (issue 12, item 1 asks for them).
#     run: timeout 400 bash benchmarks/sessions/run_session32h_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
NCU_BIN=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
TAIL=4 step 300 ncu.txt "$NCU_BIN" --clock-control none -k regex:nvfp4_row_kernel -c 4 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
  --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis \
  --section Occupancy --section LaunchStats \
  python3 benchmarks/ncu_nvfp4.py --shape 8192x8192 --only row,row_sr
grep -E "nvfp4_row_kernel|Duration|Throughput|Executed Ipc|Issue Slots|Issued Warp|No Eligible|Pipe|Stall|Warp Cycles|Achieved Occupancy|Registers|Block Size|Grid Size|Executed Instructions|Instructions" \
  "$OUT/ncu.txt" | head -150
