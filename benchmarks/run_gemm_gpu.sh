#!/usr/bin/env bash
# One device call for issue 12 items 2/5/7 (~5 min on one H200): the GPU tests of the GEMM
# kernels, MXFP8 on FP8 tensor cores against dequantize+cuBLAS, bf16 and FP8 blockwise at
# 8192^3 and the LLaMA-7B/70B layer shapes, the MXFP8 tile configs, and the per-shape path
# sweep at the 50m/125m training shapes (writes the suggested table). Logs + JSON under $OUT.
#     OUT=gpu_out bash benchmarks/run_gemm_gpu.sh
#     QUICK=1 ...   (8192^3 only for the MXFP8 bench, T = 16384 only for the sweep)
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
python3 -c "import torch; print('capability', torch.cuda.get_device_capability())" | tee -a "$OUT/env.txt"
# 1. GPU tests: the new MXFP8 kernel (every sweep config), the dispatch, Blackwell (skips on
#    Hopper), the existing GEMM kernels (their registration moved to kernels/gemm_block.py)
#    and every preset's ms.Linear on CUDA against the CPU reference (the layers' GEMM paths)
step 170 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
    tests/test_kernels_mxfp8.py tests/test_blackwell.py tests/test_kernels_gemm.py \
    tests/test_linear.py -k "not sr_generator"
# 2. MXFP8: new kernel (default, without regroup, per-chunk only) vs dequant vs bf16 vs FP8 blockwise
step 120 bench_mxfp8.log python3 benchmarks/bench_gemm.py ${QUICK:+--quick} --variants \
    bf16,mxfp8_e4m3/fp8,mxfp8_e4m3/fp8_noregroup,mxfp8_e4m3/fp8_perchunk,mxfp8_e4m3/dequant,fp8_block/torch
# 3. MXFP8 tile configs, the regroup pass alone, the share of one-chain K steps
step 100 mxfp8_configs.log python3 benchmarks/bench_gemm_sweep.py --mxfp8-configs
# 4. Per-shape path sweep at the training shapes -> suggested gemm_paths table
step 170 gemm_sweep.log python3 benchmarks/bench_gemm_sweep.py ${QUICK:+--quick} \
    --out "$OUT/gemm_table_suggested.json"
for f in bench_mxfp8 mxfp8_configs gemm_sweep; do
  tail -1 "$OUT/$f.log" | grep '^{' > "$OUT/$f.json" || true
done
