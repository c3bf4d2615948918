#!/usr/bin/env bash
# Session 19, call 4 (one H100): the expanded views' GPU tests that call 3's 100 s limit cut
# off (the split SR and no-SR dy pairs), the grouped (MoE) register kernels against the
# reference on the GPU (they share the value path), and the moe-1b nvfp4 step against session
# 18's code (.base/src = git archive f617bc7, carried) in its own process.
#     run: timeout 590 bash benchmarks/sessions/run_session19d_gpu.sh      (carry: .whl, .base)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s19d; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
BASE="env PYTHONPATH=$PWD/.base/src:/tmp/site"
pack() { tar czf "$REAL_OUT/session19d.tgz" -C "$OUT" .; }
TAIL=8 step 200 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  "tests/test_expand.py::test_gpu_expanded_views_match_reference" tests/test_grouped_gpu.py \
  -k "match or nvfp4 or mxfp4"
pack
T="benchmarks/bench_train.py --models moe-1b --batch 8 --seq 2048 --graph step --steps 6
   --warmup 2 --recipes bf16,nvfp4"
TAIL=8 step 150 train_moe_new.log python3 $T --out "$OUT/train_moe_new.json"
TAIL=8 step 150 train_moe_base.log $BASE python3 $T --out "$OUT/train_moe_base.json"
pack
