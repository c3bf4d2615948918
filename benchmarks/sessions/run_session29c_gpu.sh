#!/usr/bin/env bash
# Session 29, call 4 (one H100/H200, ~9 minutes):
# 1. the α GEMM's epilogue op with e's two half-tiles read together (gemm_alpha E_EARLY 2:
#    TMA, 3: pointer loads) against the op after the GEMM, on the GPU;
# 2. same-process A/B in training, 125m and 1b: nvfp4 against nvfp4@alpha-e2 / @alpha-e3;
# 3. the MXFP8 FP8-tensor-core GEMM's configs, the regroup pass alone and the one-chain share
#    (bench_gemm_sweep.py --mxfp8-configs; owed since session 3's 0.21x).
#     run: timeout 590 bash benchmarks/sessions/run_session29c_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s29c; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session29c.tgz" -C "$OUT" .; }
TAIL=6 step 70 gpu_tests.log python3 -m pytest -q -p no:cacheprovider -m gpu \
  tests/test_gemm_alpha.py -k "epilogue"
pack
TAIL=8 step 190 train_125m.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --recipes bf16,nvfp4,nvfp4@alpha-e2,nvfp4@alpha-e3 \
  --out "$OUT/train_125m.json"
pack
TAIL=8 step 200 train_1b.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 --recipes bf16,nvfp4,nvfp4@alpha-e3,nvfp4@alpha-e2 \
  --out "$OUT/train_1b.json"
pack
TAIL=30 step 100 mxfp8_configs.log python3 benchmarks/bench_gemm_sweep.py --mxfp8-configs
pack
