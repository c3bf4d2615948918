#!/usr/bin/env bash
# Session 14, call 6 (one H100 or H200, the session's last ~6 device minutes): NVFP4 dy pairs
# as two reg-pass launches (quant_nvfp4.CONFIG['SPLIT'], on; `@nv-nosplit` is the rows pass).
# GPU tests of the NVFP4 views, then bf16 + nvfp4 (+ nvfp4@nv-nosplit) at 125m, bf16 + nvfp4
# at 1b.
#     run: timeout 290 bash benchmarks/sessions/run_session14f_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s14f; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session14f.tgz" -C "$OUT" .; }
TAIL=8 step 60 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_expand.py tests/test_kernels_quant.py -k "nvfp4 and (expand or exact or reg)"
pack
TAIL=12 step 110 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --recipes bf16,nvfp4,nvfp4@nv-nosplit --steps 12 --warmup 3 --out "$OUT/train_125m.json"
pack
TAIL=12 step 110 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --recipes bf16,nvfp4 --steps 8 --warmup 2 --out "$OUT/train_1b.json"
pack
