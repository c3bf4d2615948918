#!/usr/bin/env bash
# Session 20, call 4 (one H100): FP8 1x128 / MXFP8 register pairs now walk backwards by default
# (calls 2-3), and a split NVFP4 pair's row launch walks backwards from where its column launch
# ended (SPLIT_REVERSE). The GPU tests no call has reached yet (the amax/reg-pass/register-pair
# tests first, then the grouped NVFP4 register kernels), then nvfp4 with and without
# SPLIT_REVERSE (nv-split-fwd) at 125m and 1b.
#     run: timeout 590 bash benchmarks/sessions/run_session20d_gpu.sh      (carry: .whl)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s20d; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session20d.tgz" -C "$OUT" .; }
TAIL=8 step 130 gpu_tests.log python3 -m pytest -q -p no:cacheprovider --tb=short \
  tests/test_kernels_quant.py::test_gpu_nvfp4_amax_pass_skips_nan \
  tests/test_kernels_quant.py::test_gpu_nvfp4_reg_pass_matches \
  tests/test_kernels_quant.py::test_gpu_rowcol_reg_exact tests/test_kernels_quant.py::test_gpu_sr_seeded \
  tests/test_kernels_quant.py::test_register_kernels_exact_in_either_tile_order \
  tests/test_kernels_quant.py::test_nvfp4_reg_amax_rounds_the_rotated_maximum
pack
TAIL=8 step 130 gpu_tests_grouped.log python3 -m pytest -q -p no:cacheprovider --tb=short \
  tests/test_grouped_nvfp4_reg.py
pack
T="benchmarks/bench_train.py --graph step --warmup 2"
TAIL=8 step 100 train_125m.log python3 $T --models 125m --steps 8 \
  --recipes bf16,nvfp4,nvfp4@nv-split-fwd --out "$OUT/train_125m.json"
pack
TAIL=8 step 150 train_1b.log python3 $T --models 1b --steps 6 \
  --recipes bf16,nvfp4,nvfp4@nv-split-fwd --out "$OUT/train_1b.json"
pack
