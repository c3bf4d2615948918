#!/usr/bin/env bash
# Session 18, call 1 (one H100): the GPU tests session 17 could not run after its last changes
# (the grouped NVFP4 register kernels after the shared-views move, the MoE step's no-sync test
# with expanded rows, the dense quantizer tests), what an NVFP4 layer's 16x16 weights cost a
# step as two code views + dequantize against one expanded view (bench_weight_views.py), and
# Nsight Compute counters of the NVFP4 amax pass and the x / dy quantize passes at a 1b shape.
#     run: timeout 580 bash benchmarks/sessions/run_session18_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s18; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session18.tgz" -C "$OUT" .; }
TAIL=30 step 60 weight_views.log python3 benchmarks/bench_weight_views.py
pack
NCU_BIN=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
TAIL=4 step 100 ncu_amax.txt "$NCU_BIN" --clock-control none -k regex:nvfp4 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section SchedulerStats python3 benchmarks/ncu_nvfp4.py --shape 16384x2048 --only x,dy \
  --amax-pass
pack
TAIL=8 step 330 gpu_tests.log python3 -m pytest -q -p no:cacheprovider --tb=short \
  tests/test_grouped_nvfp4_reg.py tests/test_grouped_gpu.py
pack
TAIL=8 step 120 gpu_tests_dense.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_kernels_quant.py
pack
