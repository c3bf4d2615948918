#!/usr/bin/env bash
# Session 21, call 4 (one H100): the row view alone at 6 programs an SM (REG_ROW), the column
# view alone on [256, 32] tiles (REG_COL): 1b and 125m nvfp4 against session 20's code
# (01abe68, carried as .base/src), each in a process of its own; then the GPU tests of the
# reg pass and the split pairs.
#     run: timeout 590 bash benchmarks/sessions/run_session21d_gpu.sh      (carry: .whl, .base)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s21d; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session21d.tgz" -C "$OUT" .; }
T="benchmarks/bench_train.py --graph step --warmup 2"
TAIL=4 step 130 train_1b_new.log python3 $T --steps 6 --models 1b --recipes bf16,nvfp4 \
  --out "$OUT/train_1b_new.json"
pack
TAIL=4 step 130 train_1b_base.log env PYTHONPATH=$PWD/.base/src:/tmp/site python3 $T --steps 6 \
  --models 1b --recipes bf16,nvfp4 --out "$OUT/train_1b_base.json"
pack
TAIL=4 step 80 train_125m_new.log python3 $T --steps 8 --models 125m --recipes bf16,nvfp4 \
  --out "$OUT/train_125m_new.json"
pack
TAIL=4 step 80 train_125m_base.log env PYTHONPATH=$PWD/.base/src:/tmp/site python3 $T --steps 8 \
  --models 125m --recipes bf16,nvfp4 --out "$OUT/train_125m_base.json"
pack
TAIL=8 step 140 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider -rA \
  tests/test_kernels_quant.py tests/test_expand.py -k "nvfp4_reg_pass_matches or split or nvfp4"
pack
