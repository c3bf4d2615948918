#!/usr/bin/env bash
# Session 10's first call: diagnose the precision switch under compiled blocks and the CUDA graph
# (session 9's nvfp4_bf16_decay paper run trained worse after its switch and ran faster than
# bf16; see benchmarks/results/README.md): per-step gradients against an eager recomputation,
# in three settings; then the MoE training step with the pair path now the default.
# Back: $OUT/session10.tgz.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=40 step "${DIAG_SECS:-330}" diag_switch.log python3 benchmarks/diag_switch_gpu.py \
  --model 125m --steps 10 --switch 4 --settings compiled_graph,eager_graph,compiled
TAIL=12 step "${MOE_SECS:-200}" moe_train.log python3 benchmarks/bench_moe.py --graph \
  --shapes qwen3_up --recipes fp8_blockwise --train-recipes fp8_blockwise,mxfp8,nvfp4
pack_out session10.tgz
