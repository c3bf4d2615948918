#!/usr/bin/env bash
# Session 50, call 1 (prepared in session 49; one H200, ~8 minutes): the README's 1b row on the
# timed DeepGEMM choice, first half: bf16, fp8_tensorwise, fp8_blockwise, mxfp8, bf16 and
# torchao float8 in one process (the second half, FP4, is run_session50b_gpu.sh; the whole row
# took 575 s in session 46, too long for one call with DeepGEMM's build). DeepGEMM built by
# gpu_env.sh's deepgemm_env (first use of the helper), the 1b GEMMs JIT-compiled in parallel.
#     run (carry [".whl", ".deps"]): OUT=$OUT timeout 590 bash benchmarks/sessions/run_session50a_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
deepgemm_env
for i in $(seq 0 11); do
  timeout 100 python3 benchmarks/bench_deepgemm.py --layers 1b --only "$i" --warm \
    > "/tmp/warm_$i.txt" 2>&1 &
done
wait
TAIL=14 step 480 train_1b.txt python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 5 --models 1b --batch 8 --seq 2048 --torchao \
  --recipes bf16,fp8_tensorwise,fp8_blockwise,mxfp8,bf16 --out "$OUT/train_1b.json"
