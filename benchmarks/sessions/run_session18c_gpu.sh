#!/usr/bin/env bash
# Session 18, call 3 (one H100): the fitted-grid machinery of call 2 was reverted (no step
# gain; the SR rows pass ran 4% slower fitted) and only the NVFP4 amax pass keeps 3 programs
# an SM (what fits). The one-weight-view GPU tests (call 2's failed on the test's own
# host-to-device copy under the sync check), then the 1b and 125m steps against the old paths.
#     run: timeout 590 bash benchmarks/sessions/run_session18c_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s18c; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session18c.tgz" -C "$OUT" .; }
TAIL=6 step 100 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_weight_view.py
pack
TAIL=12 step 300 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --recipes bf16,nvfp4,nvfp4@w-two-views,nvfp4_no_sr,nvfp4_no_sr@w-two-views --steps 6 \
  --warmup 2 --out "$OUT/train_1b.json"
pack
TAIL=10 step 110 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --recipes bf16,nvfp4,nvfp4@nv-amax-4 --steps 8 --warmup 2 --out "$OUT/train_125m.json"
pack
