#!/usr/bin/env bash
# Session 50, call 2 (prepared in session 49; one H200, ~9 minutes): the README's 1b row, second
# half: bf16, mxfp4, nvfp4, nvfp4_no_sr, bf16 in one process (no FP8 blockwise GEMM: DeepGEMM
# not needed). Then the FP8 quantizers' GPU tests (session 49's last change, `_launch_reg`
# making its own amax, had run in the interpreter only) and issue 12 item 5's NVFP4 half:
# every 50m/125m GEMM on the path training takes (bench_alpha_mm.py --training).
#     run (carry [".whl"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session50b_gpu.sh
# (Session 56, call 4: the same, on that day's defaults, for the README's 1b row.)
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=10 step 390 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,mxfp4,nvfp4,nvfp4_no_sr,bf16 --out "$OUT/train_1b.json"
TAIL=4 step 100 gpu_tests.txt python3 -m pytest -q -p no:benchmark -m gpu -n 4 \
  tests/test_kernels_quant.py -k "fp8_rowcol or fp8_weight_pair or rowcol_reg or gpu_rowcol_exact or (gpu_quantize_exact and fp8_block)" \
  tests/test_grouped_gpu.py::test_fp8_pair_kernels_equal_their_unfused_paths_on_cuda \
  tests/test_weight_cache.py::test_gpu_many_kernel_matches_per_tensor_kernels
TAIL=40 step 70 alpha_training.txt python3 benchmarks/bench_alpha_mm.py --training \
  --models 50m,125m
