#!/usr/bin/env bash
# Next session's MoE call (written in session 13, not yet run): the moe-1b training step against
# torchao's FP8 rowwise MoE path in one process (issue 18), with and without the step graph.
# Needs the torchao wheel carried: `pip download torchao==0.18.0 --no-deps -d .whl` here, then
# the device tool with carry=[".whl"] (gpu_env.sh installs it under /tmp/site).
#     run: timeout 590 bash benchmarks/run_session14_gpu.sh          (one H100 or H200)
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s14; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session14.tgz" -C "$OUT" .; }
python3 -c "import torchao; print('torchao', torchao.__version__)" | tee -a "$OUT/env.txt"
TAIL=30 step 300 moe_graph.log python3 benchmarks/bench_moe.py --shapes qwen3_down \
  --recipes fp8_blockwise --train-recipes torchao_moe_rowwise,fp8_blockwise,mxfp8,nvfp4 \
  --train-graph step --steps 6 --warmup 2
pack
TAIL=20 step 200 moe_nograph.log python3 benchmarks/bench_moe.py --shapes qwen3_down \
  --recipes fp8_blockwise --train-recipes torchao_moe_rowwise,fp8_blockwise --steps 4 --warmup 2
pack
