#!/usr/bin/env bash
# Session 10, call 2: the zero gradients of compiled switched blocks (call 1,
# benchmarks/diag_switch_gpu.py) bisected on small cases, old Function path beside the new plain
# high-precision path (nn.function._hp_linear); the trainer-level check at the paper's 125m
# config with the fix; the switch tests. Back: $OUT/session10b.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step 220 diag_hp.log python3 benchmarks/diag_hp_compile_gpu.py --model 50m
TAIL=12 step 150 diag_switch_fixed.log python3 benchmarks/diag_switch_gpu.py \
  --model 125m --steps 8 --switch 3 --settings compiled_graph --mode all
TAIL=20 step 200 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_train_gpu.py -k "compiled_switch"
pack_out session10b.tgz
