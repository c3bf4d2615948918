#!/usr/bin/env bash
# Session 15, call 11 (one H100 or H200): the NVFP4 x pairs on the rows pass instead of the reg
# pass (call 1: 86 against 96 us at 16384x768), at 125m and 1b in one process each
# (`@nv-rows`: quant_nvfp4.CONFIG['PASS'] = 'rows'), plus the pair timings at 16384x3072.
#     run: timeout 400 bash benchmarks/sessions/run_session15k_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s15k; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session15k.tgz" -C "$OUT" .; }
TAIL=14 step 60 quant_nvfp4.log python3 benchmarks/bench_quant.py --no-ref \
  --only nvfp4/rowcol_x --shapes 16384x3072,16384x768 --passes rows,reg
pack
TAIL=8 step 130 train_125m.log python3 benchmarks/bench_train.py --models 125m --graph step \
  --recipes bf16,nvfp4,nvfp4@nv-rows,nvfp4_no_sr,nvfp4_no_sr@nv-rows --steps 12 --warmup 3 \
  --out "$OUT/train_125m.json"
pack
TAIL=8 step 170 train_1b.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --recipes bf16,nvfp4,nvfp4@nv-rows --steps 8 --warmup 2 --out "$OUT/train_1b.json"
pack
