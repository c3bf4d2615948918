#!/usr/bin/env bash
# One device call for the training-speed work: GPU tests, then the end-to-end benchmark.
#     MODELS=125m PROFILE=nvfp4,fp8_blockwise bash benchmarks/run_train_gpu.sh
# torchao (optional peer) installs from wheels carried in .whl/ when present. Logs under $OUT.
set -uo pipefail
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/env.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/env.txt"
if [ -n "${TESTS:-}" ]; then
  timeout "${TEST_SECS:-240}" python3 -m pytest -q -m gpu -p no:cacheprovider --maxfail=10 $TESTS 2>&1 \
    | grep -v '^USDT' | tee "$OUT/gpu_tests.log" | tail -25
fi
timeout "${BENCH_SECS:-330}" python3 benchmarks/bench_train.py --models "${MODELS:-125m}" \
  ${TORCHAO:+--torchao} ${PROFILE:+--profile $PROFILE} ${RECIPES:+--recipes $RECIPES} \
  ${EXTRA:-} --out "$OUT/bench_train.json" 2>&1 | grep -v '^USDT' | tee "$OUT/bench_train.log" | tail -40
