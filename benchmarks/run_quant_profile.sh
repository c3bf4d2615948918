#!/usr/bin/env bash
# One device call: where the NVFP4 quantize pass and a 125m step spend their time.
#   ncu (hardware counters) + SASS statistics of the quantize pass at a training shape, a tile
#   sweep, the two training-loop GPU tests, and a profiled 125m step per recipe.
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
SHAPE=${SHAPE:-16384x768}
if [ -n "${TESTS:-}" ]; then
  timeout "${TEST_SECS:-150}" python3 -m pytest -q -m gpu -p no:cacheprovider $TESTS \
    ${TEST_K:+-k "$TEST_K"} 2>&1 | grep -v '^USDT\|^DEBUG' | tee "$OUT/gpu_tests.log" | tail -8
fi
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout "${NCU_SECS:-120}" "$NCU" --clock-control none -k regex:nvfp4_rows \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section InstructionStats --section ComputeWorkloadAnalysis --section SchedulerStats \
  --section MemoryWorkloadAnalysis \
  python3 benchmarks/ncu_nvfp4.py --shape "$SHAPE" > "$OUT/ncu_nvfp4_$SHAPE.txt" 2>&1
tail -5 "$OUT/ncu_nvfp4_$SHAPE.txt"
python3 benchmarks/ncu_nvfp4.py --shape "$SHAPE" --sass "$OUT" 2>&1 | tail -12
if [ -n "${SWEEP:-1}" ]; then
  timeout "${SWEEP_SECS:-120}" python3 benchmarks/bench_quant.py --no-ref \
    --only nvfp4/rowcol_rht_sr@,nvfp4/rowcol_2d@,nvfp4/rowcol_rht@ --shapes "$SHAPE" --sweep \
    --sweep-shapes "$SHAPE" --sweep-only "${SWEEP_ONLY:-nvfp4/rowcol_rht_sr,nvfp4/rowcol_2d}" 2>&1 \
    | grep -v '^USDT\|^{' | tee "$OUT/quant_sweep.log" | tail -40
fi
if [ -n "${PROFILE:-}" ]; then
  timeout "${BENCH_SECS:-180}" python3 benchmarks/bench_train.py --models 125m \
    --recipes "${RECIPES:-bf16,nvfp4,fp8_blockwise}" --graph step --steps 6 --warmup 2 \
    --profile "$PROFILE" --out "$OUT/bench_train.json" 2>&1 | grep -v '^USDT\|^DEBUG' \
    | tee "$OUT/bench_train.log" | grep -v '^{' | tail -80
fi
