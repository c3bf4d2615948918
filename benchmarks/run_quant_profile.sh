#!/usr/bin/env bash
# One device call: where the quantize passes and a 125m step spend their time.
#   GPU tests (TESTS, TEST_K), ncu hardware counters + SASS statistics of the NVFP4 quantize
#   pass at a training shape (NCU=1), a tile sweep (SWEEP_SHAPES, SWEEP_ONLY), and a 125m
#   training benchmark (RECIPES) with profiled steps (PROFILE).
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
SHAPE=${SHAPE:-16384x768}
if [ -n "${TESTS:-}" ]; then
  timeout "${TEST_SECS:-150}" python3 -m pytest -q -m gpu -p no:cacheprovider $TESTS \
    ${TEST_K:+-k "$TEST_K"} 2>&1 | grep -v '^USDT\|^DEBUG' | tee "$OUT/gpu_tests.log" | tail -8
fi
if [ "${NCU:-0}" = 1 ]; then
  NCU_BIN=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  timeout "${NCU_SECS:-120}" "$NCU_BIN" --clock-control none -k regex:nvfp4_rows \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section InstructionStats --section ComputeWorkloadAnalysis --section SchedulerStats \
    --section MemoryWorkloadAnalysis \
    python3 benchmarks/ncu_nvfp4.py --shape "$SHAPE" > "$OUT/ncu_nvfp4_$SHAPE.txt" 2>&1
  tail -5 "$OUT/ncu_nvfp4_$SHAPE.txt"
  python3 benchmarks/ncu_nvfp4.py --shape "$SHAPE" --sass "$OUT" 2>&1 | tail -12
fi
if [ -n "${SWEEP_SHAPES:-}" ]; then
  timeout "${SWEEP_SECS:-150}" python3 benchmarks/bench_quant.py --no-ref \
    --only "${QONLY:-nvfp4/rowcol_rht_sr@,nvfp4/rowcol_2d@,nvfp4/rowcol_rht@,fp8_block/1x128_rowcol,mxfp8_e4m3/rowcol}" \
    --shapes "$SHAPE" --sweep --sweep-shapes "$SWEEP_SHAPES" --sweep-only "${SWEEP_ONLY:-}" 2>&1 \
    | grep -v '^USDT' | tee "$OUT/quant_sweep.log" | grep -v '^{' | tail -80
fi
if [ -n "${RECIPES:-}" ]; then
  timeout "${BENCH_SECS:-240}" python3 benchmarks/bench_train.py --models "${MODELS:-125m}" \
    --recipes "$RECIPES" --graph step --steps "${STEPS:-8}" --warmup 2 \
    ${PROFILE:+--profile $PROFILE} ${TORCHAO:+--torchao} --out "$OUT/bench_train.json" 2>&1 \
    | grep -v '^USDT\|^DEBUG' | tee "$OUT/bench_train.log" | grep -v '^{' | tail -40
fi
