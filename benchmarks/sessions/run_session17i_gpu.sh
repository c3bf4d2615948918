#!/usr/bin/env bash
# Session 17, call 9 (one H100): MoE NVFP4 row views (the grouped GEMMs' A operands) written
# expanded by the register kernels (nn.grouped.CONFIG["EXPAND_ROWS"]): the grouped tests on
# CUDA, moe-1b against codes + the GEMM's decode pass (@grp-nv-codes), and the MoE ops.
#     run: timeout 580 bash benchmarks/sessions/run_session17i_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s17i; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session17i.tgz" -C "$OUT" .; }
TAIL=6 step 190 gpu_tests.log python3 -m pytest -q -p no:cacheprovider --tb=short -x \
  tests/test_grouped_nvfp4_reg.py tests/test_grouped_gpu.py -k "not compiles"
pack
TAIL=10 step 240 train_moe.log python3 benchmarks/bench_train.py --models moe-1b --batch 8 \
  --seq 2048 --graph step --recipes bf16,nvfp4,nvfp4@grp-nv-codes --steps 6 --warmup 2 \
  --out "$OUT/train_moe.json"
pack
TAIL=12 step 120 moe_ops.log python3 benchmarks/bench_moe.py --no-train --graph --recipes nvfp4
pack
