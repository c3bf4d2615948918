#!/usr/bin/env bash
# Session 33, call 2 (one H100/H200, ~8 minutes; carry .whl for torchao): the one row-kernel
# GPU test call 1's step limit cut (with the other three), ms.Linear at issue 12's shape beside
# torchao's blockwise / rowwise / tensorwise layers in the same process (eager and compiled),
# with a kernel breakdown of fp8_blockwise and torchao's blockwise layer; then the Nsight
# Compute run of the Gluon MXFP8 kernel owed since session 31 (run_session31a_gpu.sh's step).
#     run: timeout 590 bash benchmarks/sessions/run_session33b_gpu.sh      (carry: .whl)
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=4 step 240 tests.txt python3 -m pytest -q -m gpu tests/test_kernels_nvfp4_row.py
TAIL=16 step 200 bench_linear.txt python3 benchmarks/bench_linear.py \
  --recipes nvfp4,nvfp4_no_sr,mxfp8,fp8_blockwise,fp8_tensorwise,fp8_blockwise@compile,fp8_tensorwise@compile,bf16@compile \
  --torchao --profile fp8_blockwise,torchao_blockwise
NCU_BIN=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
TAIL=4 step 130 ncu.txt "$NCU_BIN" --clock-control none -k regex:mxfp8_wgmma \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
  --section SchedulerStats --section MemoryWorkloadAnalysis --section SourceCounters \
  python3 benchmarks/bench_mxfp8_wgmma.py --ncu-target --shapes 8192x8192x8192 \
  --data perchunk,uniform
grep -E "mxfp8_wgmma|Duration|Throughput|Pipe|Issue|Stall|Warp Cycles|Eligible|Bank|Shared" \
  "$OUT/ncu.txt" | head -60 > "$OUT/ncu_summary.txt"
gzip -f "$OUT/ncu.txt"
