#!/usr/bin/env bash
# Session 21, call 5 (one H100): the GPU tests of the reg pass and split pairs (verbose; call 4's
# step limit cut them after 30 passes), 1b nvfp4 against session 20's code again (base first
# this time), and 125m nvfp4_no_sr against it.
#     run: timeout 590 bash benchmarks/sessions/run_session21e_gpu.sh      (carry: .whl, .base)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s21e; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session21e.tgz" -C "$OUT" .; }
TAIL=30 step 170 gpu_tests.log python3 -m pytest -v -m gpu -p no:cacheprovider \
  tests/test_kernels_quant.py tests/test_expand.py -k "nvfp4_reg_pass_matches or split or sr_seeded or expan"
pack
T="benchmarks/bench_train.py --graph step --warmup 2"
TAIL=4 step 120 train_1b_base.log env PYTHONPATH=$PWD/.base/src:/tmp/site python3 $T --steps 6 \
  --models 1b --recipes bf16,nvfp4 --out "$OUT/train_1b_base.json"
pack
TAIL=4 step 120 train_1b_new.log python3 $T --steps 6 --models 1b --recipes bf16,nvfp4 \
  --out "$OUT/train_1b_new.json"
pack
TAIL=4 step 70 train_125m_base.log env PYTHONPATH=$PWD/.base/src:/tmp/site python3 $T --steps 8 \
  --models 125m --recipes bf16,nvfp4_no_sr --out "$OUT/train_125m_base.json"
pack
TAIL=4 step 70 train_125m_new.log python3 $T --steps 8 --models 125m --recipes bf16,nvfp4_no_sr \
  --out "$OUT/train_125m_new.json"
pack
