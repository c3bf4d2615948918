#!/usr/bin/env bash
# Session 21, call 6 (one H100): profiles before the next change: one step of 1b fp8_blockwise
# and mxfp8, and of 125m mxfp8 and nvfp4 (torch.profiler: by kind, top kernels, microscale ops).
#     run: timeout 590 bash benchmarks/sessions/run_session21f_gpu.sh      (carry: .whl)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s21f; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session21f.tgz" -C "$OUT" .; }
T="benchmarks/bench_train.py --graph step --warmup 2"
TAIL=6 step 300 train_1b_profile.log python3 $T --steps 6 --models 1b \
  --recipes bf16,fp8_blockwise,mxfp8 --profile fp8_blockwise,mxfp8 --out "$OUT/train_1b_profile.json"
pack
TAIL=6 step 200 train_125m_profile.log python3 $T --steps 8 --models 125m \
  --recipes bf16,mxfp8,nvfp4 --profile mxfp8,nvfp4 --out "$OUT/train_125m_profile.json"
pack
