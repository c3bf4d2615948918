#!/usr/bin/env bash
# Next session (one H100/H200, ~3 minutes): what binds the Gluon MXFP8 kernel's per-chunk steps
# (session 30: neither MMA latency nor the scaling arithmetic, calls 8-9). Nsight Compute with
# source-level stall sampling on the forced per-chunk and forced one-chain launches at 8192^3.
#     run: timeout 590 bash benchmarks/sessions/run_session31a_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s31a; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session31a.tgz" -C "$OUT" .; }
NCU_BIN=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
TAIL=4 step 300 ncu.txt "$NCU_BIN" --clock-control none -k regex:mxfp8_wgmma \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
  --section SchedulerStats --section MemoryWorkloadAnalysis --section SourceCounters \
  python3 benchmarks/bench_mxfp8_wgmma.py --ncu-target --shapes 8192x8192x8192 \
  --data perchunk,uniform
grep -E "mxfp8_wgmma|Duration|Throughput|Pipe|Issue|Stall|Warp Cycles|Eligible|Bank|Shared" \
  "$OUT/ncu.txt" | head -120
pack
