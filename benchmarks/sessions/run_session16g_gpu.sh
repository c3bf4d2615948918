#!/usr/bin/env bash
# Session 16, call 7 (one H100 or H200): the moe-1b step's rows that call 6's time limit cut
# off (torchao's compile took 84 s there; its row is in call 6): bf16, fp8_blockwise, mxfp8,
# nvfp4 with the experts' factors in the grouped GEMM's epilogue.
#     run: timeout 300 bash benchmarks/sessions/run_session16g_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s16g; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session16g.tgz" -C "$OUT" .; }
TAIL=12 step 280 train_moe.log python3 benchmarks/bench_train.py --models moe-1b --batch 8 \
  --seq 2048 --graph step --recipes bf16,fp8_blockwise,mxfp8,nvfp4 \
  --steps 6 --warmup 2 --out "$OUT/train_moe.json"
pack
