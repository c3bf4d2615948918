#!/usr/bin/env bash
# Session 20, call 2 (one H100): the GPU tests call 1's time limit cut (the grouped NVFP4
# register kernels, the amax/reg-pass tests), then the steps: 1b nvfp4 against session 19's code
# (.base/src = 84e8417) in its own process, and the tile-order A/Bs of the FP8 1x128 and MXFP8
# register pair kernels (fp8-rev, mx8-rev) and of the NVFP4 amax pass (nv-amax-fwd), 1b and 125m.
#     run: timeout 590 bash benchmarks/sessions/run_session20b_gpu.sh      (carry: .whl, .base)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s20b; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
BASE="env PYTHONPATH=$PWD/.base/src:/tmp/site"
pack() { tar czf "$REAL_OUT/session20b.tgz" -C "$OUT" .; }
TAIL=8 step 130 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_grouped_nvfp4_reg.py tests/test_kernels_quant.py -k "amax or reg or sr_seeded or rowcol or grouped or kernel"
pack
T="benchmarks/bench_train.py --graph step --warmup 2"
TAIL=10 step 200 train_1b_new.log python3 $T --models 1b --steps 6 \
  --recipes bf16,nvfp4,nvfp4@nv-amax-fwd,fp8_blockwise,fp8_blockwise@fp8-rev,mxfp8,mxfp8@mx8-rev \
  --out "$OUT/train_1b_new.json"
pack
TAIL=6 step 90 train_1b_base.log $BASE python3 $T --models 1b --steps 6 --recipes bf16,nvfp4 \
  --out "$OUT/train_1b_base.json"
pack
TAIL=10 step 140 train_125m_new.log python3 $T --models 125m --steps 8 \
  --recipes bf16,nvfp4@nv-amax-fwd,fp8_blockwise,fp8_blockwise@fp8-rev,mxfp8,mxfp8@mx8-rev \
  --out "$OUT/train_125m_new.json"
pack
