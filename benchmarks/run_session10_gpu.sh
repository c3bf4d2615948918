#!/usr/bin/env bash
# Next session's first call (written in session 9, not yet run): the GPU test of a compiled
# model switched to bf16 GEMMs mid-run, with and without the CUDA graph (session 9's
# nvfp4_bf16_decay paper run went wrong after its switch; see benchmarks/results/README.md),
# the train-harness GPU tests around it, then the MoE step with the pair path now the default.
# Back: $OUT/session10.tgz.
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=30 step "${TEST_SECS:-300}" gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  --tb=long tests/test_train_gpu.py -k "switch or cuda_graph"
TAIL=12 step "${MOE_SECS:-240}" moe_train.log python3 benchmarks/bench_moe.py --graph \
  --shapes qwen3_up --recipes fp8_blockwise --train-recipes fp8_blockwise,mxfp8,nvfp4
pack_out session10.tgz
