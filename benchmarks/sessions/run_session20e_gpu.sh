#!/usr/bin/env bash
# Session 20, call 5 (one H100): the GPU tests calls 1-4 did not reach (their limits cut them on
# cold Triton caches): the last reg-pass shape, the register pair kernels (now backwards by
# default), in-kernel SR, the grouped register kernels' last four tests; then moe-1b nvfp4 with
# the faster grouped amax pass against session 19's code (.base/src = 84e8417), each in its own
# process.
#     run: timeout 590 bash benchmarks/sessions/run_session20e_gpu.sh      (carry: .whl, .base)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s20e; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
BASE="env PYTHONPATH=$PWD/.base/src:/tmp/site"
pack() { tar czf "$REAL_OUT/session20e.tgz" -C "$OUT" .; }
G=tests/test_grouped_nvfp4_reg.py
TAIL=12 step 240 gpu_tests.log python3 -m pytest -v -p no:cacheprovider --tb=short \
  "tests/test_kernels_quant.py::test_gpu_nvfp4_reg_pass_matches" \
  tests/test_kernels_quant.py::test_gpu_rowcol_reg_exact tests/test_kernels_quant.py::test_gpu_sr_seeded \
  $G::test_philox_per_expert_equals_the_dense_kernels $G::test_sync_free_op_takes_the_kernel_and_says_so \
  $G::test_expanded_views_equal_the_reference
pack
T="benchmarks/bench_train.py --models moe-1b --batch 8 --seq 2048 --graph step --steps 6 --warmup 2"
TAIL=6 step 150 train_moe_new.log python3 $T --recipes bf16,nvfp4 --out "$OUT/train_moe_new.json"
pack
TAIL=6 step 150 train_moe_base.log $BASE python3 $T --recipes bf16,nvfp4 \
  --out "$OUT/train_moe_base.json"
pack
