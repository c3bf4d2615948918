#!/usr/bin/env bash
# Session 22, call 1 (one H100): the relu² MLP as one autograd node (microscale.nn.mlp: the up
# projection's dy pair quantized from ds and u, relu(u)² quantized from u). GPU tests, then
# 1b and 125m steps of the new code (fp8_blockwise fused and "@mlp-unfused" in one process) and
# of session 21's code (`git archive 5013777 src`, carried as .base/src) in its own process.
#     run: timeout 590 bash benchmarks/sessions/run_session22_gpu.sh      (carry: .base)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s22a; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session22a.tgz" -C "$OUT" .; }
TAIL=8 step 150 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_mlp.py \
  tests/test_recompute.py tests/test_train_gpu.py -k "relu or cuda or fp8_blockwise"
pack
T="benchmarks/bench_train.py --graph step --warmup 2"
TAIL=8 step 200 train_1b_new.log python3 $T --models 1b --steps 6 \
  --recipes bf16,fp8_blockwise,fp8_blockwise@mlp-unfused,fp8_tensorwise --out "$OUT/train_1b_new.json"
pack
TAIL=8 step 150 train_1b_base.log env PYTHONPATH=$PWD/.base/src python3 $T --models 1b --steps 6 \
  --recipes bf16,fp8_blockwise,fp8_tensorwise --out "$OUT/train_1b_base.json"
pack
TAIL=8 step 80 train_125m_new.log python3 $T --models 125m --steps 8 \
  --recipes bf16,fp8_blockwise,fp8_blockwise@mlp-unfused --out "$OUT/train_125m_new.json"
pack
