#!/usr/bin/env bash
# Session 43, call 2 (one H200, ~9 minutes): where the MXFP8 pair kernel's DRAM time goes
# (Nsight Compute memory tables: bytes read and written against the tensors' sizes), the FP8
# 1x128 pair with its tile loop software-pipelined at 1b's widths (call 1: 16384x3072 81.95 ->
# 72.61 µs), then 1b fp8_blockwise training with it against the default in one process.
#     run: OUT=$OUT timeout 590 bash benchmarks/sessions/run_session43b_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
NCU_BIN=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
TAIL=4 step 120 ncu_mx_mem.txt "$NCU_BIN" --clock-control none -k regex:mx8_rowcol_reg -c 4 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables \
  --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_atom.sum,lts__t_sectors_op_red.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,smsp__warps_issue_stalled_barrier_per_issue_active.ratio,smsp__warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__warps_issue_stalled_drain_per_issue_active.ratio,smsp__warps_issue_stalled_membar_per_issue_active.ratio \
  python3 benchmarks/ncu_nvfp4.py --shape 16384x3072 --only mx8_x,mx8_dy
grep -E "mx8_rowcol|Duration|dram__|lts__t_sectors|l1tex__t_|stalled|DRAM Throughput|Mem Busy|Max Bandwidth|L2 Hit|L1/TEX Hit" \
  "$OUT/ncu_mx_mem.txt" | head -80
TAIL=30 step 120 sweep_fp8.txt python3 benchmarks/bench_quant.py --no-ref --sweep \
  --sweep-only fp8_block/1x128_rowcol --sweep-with NAN_SEL --sweep-shapes 16384x8192,16384x2048 \
  --shapes 16384x2048 --only fp8_block/1x128_rowcol
TAIL=14 step 330 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,fp8_blockwise,fp8_blockwise@fp8-s2,fp8_blockwise --out "$OUT/train_1b.json"
