#!/usr/bin/env bash
# Session 18, call 4 (one H100): the one-weight-view GPU tests (call 3's asserted the path on
# ms.explain()'s last call, wgrad's; now the fprop call's), the nvfp4 training steps' no-sync
# and CUDA-graph tests with one view on, and one profiled 1b nvfp4 step (where the time goes
# now that W is quantized once and no dequantize pass runs for it).
#     run: timeout 560 bash benchmarks/sessions/run_session18d_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s18d; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session18d.tgz" -C "$OUT" .; }
TAIL=6 step 200 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_weight_view.py tests/test_train_gpu.py \
  -k "one_view or (no_host_sync and nvfp4) or (cuda_graph_replays and nvfp4)"
pack
TAIL=14 step 220 train_1b_profile.log python3 benchmarks/bench_train.py --models 1b \
  --graph step --recipes bf16,nvfp4 --steps 6 --warmup 2 --profile nvfp4 \
  --out "$OUT/train_1b_profile.json"
pack
