#!/usr/bin/env bash
# One device call: the Linear benchmark, the GPU tests, the GEMM and quantization benchmarks.
# Logs go under $OUT (or ./gpu_out). From the repo root on a CUDA machine:
#     bash benchmarks/run_gpu.sh            # full shapes
#     QUICK=1 bash benchmarks/run_gpu.sh    # 8192^3 / 8192^2 only
# Each step has its own time limit so that one slow step cannot starve the others.
set -uo pipefail
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
quick=${QUICK:+--quick}
step() { local secs=$1 log=$2; shift 2; echo "### $*" | tee "$OUT/$log"
         timeout "$secs" "$@" 2>&1 | grep -v '^USDT' | tee -a "$OUT/$log"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/env.txt"
step 120 bench_linear.log python3 benchmarks/bench_linear.py --profile nvfp4,fp8_blockwise
step 130 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_quant.py \
    tests/test_kernels_gemm.py tests/test_linear.py
step 90 bench_gemm.log python3 benchmarks/bench_gemm.py ${quick:---shapes all} --variants \
    bf16,nvfp4/dequant,nvfp4/mainloop,mxfp4/dequant,mxfp8_e4m3/dequant,fp8_block/torch,fp8_tensor/torch
step 130 bench_quant.log python3 benchmarks/bench_quant.py --no-ref $quick
