#!/usr/bin/env bash
# Next session, call 1 (one H100, ~9.5 minutes; carry .whl for torchao 0.18):
# 1. the grouped NVFP4 register kernel's expanded row views with EXP_NAN_MAX (on by default
#    since session 28, GPU-run for the dense kernels only; these tests run on CUDA without -m gpu);
# 2. the README's 125m training table re-run with session 28's code: every recipe and torchao in
#    one process, now without the ~67 MB a run of leaked cuBLAS workspaces (speed.warmup_stream),
#    so that every row's memory bracket is its own.
# Call 2 (run_session25c_gpu.sh's command, unchanged): the 1b table the same way.
#     run: timeout 590 bash benchmarks/sessions/run_session29a_gpu.sh      (device tool: carry [".whl"])
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s29a; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session29a.tgz" -C "$OUT" .; }
TAIL=6 step 90 gpu_tests.log python3 -m pytest -q -p no:cacheprovider \
  tests/test_grouped_nvfp4_reg.py -k "expanded_views"
pack
TAIL=16 step 480 train_125m.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --torchao \
  --recipes bf16,fp8_tensorwise,fp8_blockwise,mxfp8,mxfp4,nvfp4,nvfp4_no_sr \
  --out "$OUT/train_125m.json"
pack
