#!/usr/bin/env bash
# Session 37, call 1 (one H100/H200, ~9 minutes): NVFP4's recomputed xᵀ written expanded by the
# reg pass (nn.recompute: the down projection's input quantized from u in backward, no kept
# codes, no decode pass). Its GPU tests (the recompute layer and the fused relu² MLP with it,
# the prologues on edge values with a lone expanded column view), then the 1b step in one
# process: bf16, nvfp4, nvfp4@recompute twice each (issue 11's nvfp4 line, 0.9x).
#     run: timeout 590 bash benchmarks/sessions/run_session37_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=8 step 170 tests.txt python3 -m pytest -q -rA -m gpu --tb=short \
  "tests/test_recompute.py::test_same_bits_on_cuda_with_the_kernels" \
  "tests/test_mlp.py::test_same_bits_on_cuda_with_the_kernels" \
  tests/test_recompute.py::test_nvfp4_prologues_match_the_reference_on_edge_values -k "nvfp4 or cuda"
TAIL=12 step 400 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 6 --models 1b --batch 8 --seq 2048 \
  --recipes bf16,nvfp4,nvfp4@recompute,nvfp4,nvfp4@recompute,bf16 --out "$OUT/train_1b.json"
