#!/usr/bin/env bash
# Session 15, call 1 (one H100 or H200): measure before building.
# 1. GPU tests of the quantizers (session 14's review mends never ran on a GPU).
# 2. NVFP4 pairs as a layer asks for them (x: rows RNE expanded + columns RHT as codes; dy:
#    rows SR + columns RHT+SR, both expanded), rows pass vs the split vs the reg pass with
#    SR rows, at the 125m model's shapes.
# 3. moe-1b: bf16 and fp8_blockwise (one CUDA graph a step), then one profiled step each of
#    fp8_blockwise and torchao's FP8 rowwise MoE path (where do the extra ~90 ms go?).
# 4. One profiled 1b fp8_blockwise step (where are the last 4% to 1.2x?).
#     run: timeout 560 bash benchmarks/sessions/run_session15_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s15a; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session15a.tgz" -C "$OUT" .; }
TAIL=8 step 90 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider --tb=short \
  tests/test_kernels_quant.py tests/test_expand.py -k "nvfp4 or mx or rht"
pack
TAIL=30 step 60 quant_nvfp4.log python3 benchmarks/bench_quant.py --no-ref \
  --only nvfp4/rowcol_dy,nvfp4/rowcol_x --shapes 16384x768,16384x3072 --passes rows,split,reg-sr
pack
TAIL=30 step 230 train_moe.log python3 benchmarks/bench_train.py --models moe-1b --batch 8 \
  --seq 2048 --graph step --recipes bf16,fp8_blockwise --steps 6 --warmup 2 \
  --profile fp8_blockwise,torchao_moe_rowwise --out "$OUT/train_moe.json"
pack
TAIL=10 step 110 train_1b_profile.log python3 benchmarks/bench_train.py --models 1b --graph step \
  --recipes fp8_blockwise --steps 3 --warmup 1 --profile fp8_blockwise --out "$OUT/train_1b.json"
pack
