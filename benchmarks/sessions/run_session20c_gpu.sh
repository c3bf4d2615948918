#!/usr/bin/env bash
# Session 20, call 3 (one H100): the GPU tests calls 1-2 did not reach (cut by their limits on
# the slower reference tests before them): the grouped NVFP4 register kernels on the device and
# the reg pass / amax pass / register pair tests; then 1b nvfp4 new and base (session 19's code,
# .base/src = 84e8417) each in its own process, 1b mxfp8 with and without mx8-rev, and a 125m
# repeat of call 2's tile-order A/Bs with the reversed kernels first.
#     run: timeout 590 bash benchmarks/sessions/run_session20c_gpu.sh      (carry: .whl, .base)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s20c; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
BASE="env PYTHONPATH=$PWD/.base/src:/tmp/site"
pack() { tar czf "$REAL_OUT/session20c.tgz" -C "$OUT" .; }
TAIL=8 step 100 gpu_tests.log python3 -m pytest -q -p no:cacheprovider --tb=short \
  tests/test_grouped_nvfp4_reg.py tests/test_kernels_quant.py::test_gpu_nvfp4_amax_pass_skips_nan \
  tests/test_kernels_quant.py::test_gpu_nvfp4_reg_pass_matches \
  tests/test_kernels_quant.py::test_gpu_rowcol_reg_exact tests/test_kernels_quant.py::test_gpu_sr_seeded
pack
T="benchmarks/bench_train.py --graph step --warmup 2"
TAIL=6 step 120 train_1b_base.log $BASE python3 $T --models 1b --steps 6 --recipes bf16,nvfp4 \
  --out "$OUT/train_1b_base.json"
pack
TAIL=8 step 170 train_1b_new.log python3 $T --models 1b --steps 6 \
  --recipes bf16,nvfp4,mxfp8@mx8-rev,mxfp8 --out "$OUT/train_1b_new.json"
pack
TAIL=8 step 120 train_125m_new.log python3 $T --models 125m --steps 8 \
  --recipes bf16,fp8_blockwise@fp8-rev,fp8_blockwise,mxfp8@mx8-rev,mxfp8 \
  --out "$OUT/train_125m_new.json"
pack
