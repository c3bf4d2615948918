#!/usr/bin/env bash
# Session 14, call 1 (one H100 or H200): (1) the FP8 GEMMs of the 1b model's linears, blockwise
# cuBLASLt in both operand orders against tensorwise and bf16 (where fp8_blockwise loses to
# fp8_tensorwise at 1b; issue 11); (2) the moe-1b training step against torchao's FP8 rowwise MoE
# path in one process, the step in one CUDA graph (issue 18).
# Needs the torchao wheel carried: `pip download torchao==0.18.0 --no-deps -d .whl` here, then
# the device tool with carry=[".whl"] (gpu_env.sh installs it under /tmp/site).
#     run: timeout 590 bash benchmarks/sessions/run_session14_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s14; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session14.tgz" -C "$OUT" .; }
python3 -c "import torchao; print('torchao', torchao.__version__)" | tee -a "$OUT/env.txt"
TAIL=80 step 150 gemm_1b.log python3 benchmarks/bench_gemm_sweep.py --quick --models 1b \
  --families fp8,fp8t --out "$OUT/gemm_1b_suggested.json"
pack
TAIL=30 step 330 moe_graph.log python3 benchmarks/bench_moe.py --shapes qwen3_down \
  --recipes fp8_blockwise --train-recipes torchao_moe_rowwise,fp8_blockwise,mxfp8,nvfp4 \
  --train-graph step --steps 6 --warmup 2
pack
