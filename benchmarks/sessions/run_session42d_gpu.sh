#!/usr/bin/env bash
# Session 42, call 4 (one H200, ~9 minutes): Nsight Compute on the NVFP4 row kernel (1x16 RNE
# and SR codes) and the SR dy pair's launches at 8192² (stall reasons: why SR runs 1.3x RNE
# and the RHT+SR column view at 40% of the copy rate), then 1b training at today's defaults.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session42d_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
NCU_BIN=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
TAIL=4 step 150 ncu.txt "$NCU_BIN" --clock-control none \
  -k regex:"nvfp4_row_kernel|nvfp4_rowcol_reg" -c 8 \
  --section SpeedOfLight --section SchedulerStats --section WarpStateStats \
  --section InstructionStats --section Occupancy --section LaunchStats \
  python3 benchmarks/ncu_nvfp4.py --shape 8192x8192 --only row,row_sr,dy
grep -E "nvfp4_row|Duration|DRAM Throughput|Issue Slots Busy|Executed Instructions  |Achieved Occupancy|Registers Per|Stall|One or More Eligible|Warp Cycles Per Issued" \
  "$OUT/ncu.txt" | head -90
TAIL=14 step 380 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 --recipes bf16,nvfp4,mxfp8,nvfp4 \
  --out "$OUT/train_1b.json"
