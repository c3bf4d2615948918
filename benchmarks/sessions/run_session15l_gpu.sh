#!/usr/bin/env bash
# Session 15, call 12 (one H100 or H200): nvfp4_no_sr's dy column views written expanded by the
# reg pass itself (quant_nvfp4.CONFIG['REG']['COL_EXP'], `@nv-reg-colexp`) against codes plus
# the decode pass, at 125m and 1b; the expanded-view GPU tests.
#     run: timeout 330 bash benchmarks/sessions/run_session15l_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s15l; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session15l.tgz" -C "$OUT" .; }
TAIL=6 step 60 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_expand.py -k nvfp4
pack
TAIL=8 step 110 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --recipes bf16,nvfp4_no_sr,nvfp4_no_sr@nv-reg-colexp --steps 12 --warmup 3 \
  --out "$OUT/train_125m.json"
pack
TAIL=8 step 140 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --recipes bf16,nvfp4_no_sr,nvfp4_no_sr@nv-reg-colexp --steps 8 --warmup 2 \
  --out "$OUT/train_1b.json"
pack
