#!/usr/bin/env bash
# Not run: session 11 ran these checks (the GPU tests of test_schedule.py's compiled switch,
# --check-compile) in benchmarks/sessions/run_session11b_gpu.sh, and the paper runs through
# benchmarks/paper/run_paper.sh. Written in session 10 as the next session's first call: the compiled-switch gradient
# test on CUDA for dense and MoE blocks (the grouped layers' high-precision GEMMs became the op
# microscale::hp_grouped_mm in session 10 without a GPU run), the MoE GPU tests, then the moe-1b
# step with the step graph. Back: $OUT/session11.tgz. Then the paper runs, one job per two calls
# on one warm machine: timeout 590 env BUDGET_S=540 CKPT=/root/paper ONLY=<job>
# bash benchmarks/paper/run_paper.sh (LAST=1 on the second), jobs nvfp4_no_2d,
# nvfp4_all_blocks, nvfp4_base_all_blocks.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=20 step "${TEST_SECS:-300}" gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  --tb=short tests/test_schedule.py tests/test_grouped_gpu.py
TAIL=8 step 150 check_compile.log python3 -m microscale.train.cli train --recipe nvfp4 \
  --model micro --steps 6 --batch-size 4 --seq-len 128 --switch-step 3 --switch-mode fprop \
  --compile on --cuda-graph --check-compile --device cuda --out /tmp/check_compile --no-progress
TAIL=12 step "${MOE_SECS:-200}" moe_train.log python3 benchmarks/bench_moe.py --graph \
  --shapes qwen3_up --recipes fp8_blockwise --train-recipes fp8_blockwise,nvfp4 --train-graph step
pack_out session11.tgz
