#!/usr/bin/env bash
# Session 36, call 2 (one H100/H200, ~9 minutes): the GPU tests call 1's time limit cut (the
# SR paths through PTX mul.rz: the reg pass, the expanded views, MXFP4's values), Nsight
# Compute on the row kernel's RNE and SR views (instructions an element against session 32's
# 18.1 / 28.5), and a 125m training step (bf16, nvfp4) at the new SR.
#     run: timeout 590 bash benchmarks/sessions/run_session36b_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=30 step 300 tests.txt python3 -m pytest -q -rA -m gpu --tb=short \
  "tests/test_kernels_quant.py::test_gpu_nvfp4_reg_pass_matches" \
  tests/test_expand.py::test_gpu_expanded_views_match_reference \
  "tests/test_kernels_quant.py::test_nvfp4_reg_pass_e2m1_codes_exact"
NCU_BIN=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
TAIL=4 step 120 ncu.txt "$NCU_BIN" --clock-control none -k regex:nvfp4_row_kernel -c 4 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats \
  --section InstructionStats --section Occupancy \
  python3 benchmarks/ncu_nvfp4.py --shape 8192x8192 --only row,row_sr
grep -E "nvfp4_row_kernel|Duration|DRAM Throughput|Issue Slots|Executed Instructions  |Achieved Occupancy" \
  "$OUT/ncu.txt" | head -40
TAIL=10 step 150 train_125m.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes bf16,nvfp4 --out "$OUT/train_125m.json"
