#!/usr/bin/env bash
# Session 30, call 3 (one H100/H200, ~5 minutes): the Gluon MXFP8 kernel with its scales through TMA and shared memory,
# flags: GPU tests, its ceiling (every step one chain) and floor (every step per chunk) against
# bf16 at 8192^3 and 16384x8192x8192, and Nsight Compute on both paths at 8192^3.
#     run: timeout 590 bash benchmarks/sessions/run_session30d_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s30d; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session30d.tgz" -C "$OUT" .; }
TAIL=6 step 150 tests.log python3 -m pytest -q -m gpu tests/test_kernels_mxfp8_wgmma.py
pack
TAIL=40 step 200 bench.log python3 benchmarks/bench_mxfp8_wgmma.py \
  --shapes 8192x8192x8192,16384x8192x8192 --data uniform,perchunk,gaussian,outliers
pack
NCU_BIN=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
TAIL=4 step 150 ncu.txt "$NCU_BIN" --clock-control none -k regex:mxfp8_wgmma \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
  --section SchedulerStats --section Occupancy python3 benchmarks/bench_mxfp8_wgmma.py \
  --ncu-target --shapes 8192x8192x8192 --data uniform
grep -E "mxfp8_wgmma|Duration|Throughput|Pipe|Issue|Stall|Warp Cycles|Eligible|Active Warps|Registers|Tensor" "$OUT/ncu.txt" | head -80
pack
