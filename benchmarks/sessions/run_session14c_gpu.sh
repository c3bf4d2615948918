#!/usr/bin/env bash
# Session 14, call 3 (one H100 or H200): every recipe at 1b in one process (mxfp4 for the first
# time at 1b; the MXFP4 kernel writing expanded views, against its codes path), then the
# moe-1b step against torchao's FP8 rowwise MoE path again (call 2: the hook's call counter was
# a Dynamo guard and recompiled every call; now counted in an eager probe). Carry the torchao
# wheel (.whl/, see run_session14_gpu.sh).
#     run: timeout 590 bash benchmarks/sessions/run_session14c_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s14c; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session14c.tgz" -C "$OUT" .; }
TAIL=40 step 330 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --recipes bf16,fp8_tensorwise,fp8_blockwise,mxfp8,mxfp4,mxfp4@mx-codes,nvfp4 --steps 10 --warmup 3 \
  --out "$OUT/train_1b.json"
pack
TAIL=30 step 200 moe_graph.log python3 benchmarks/bench_moe.py --shapes qwen3_down --recipes "" \
  --train-recipes torchao_moe_rowwise,fp8_blockwise,mxfp8,nvfp4 --train-graph step --steps 6 --warmup 2
pack
