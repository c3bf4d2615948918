#!/usr/bin/env bash
# Session 33, call 3 (one H100/H200, ~8 minutes; carry .whl for torchao): ms.Linear at issue
# 12's shape with the graph-replayed column beside torchao's layers, the nvfp4 layer's kernel
# breakdown; the nvfp4 layer with the row kernel taking its expanded row views; and MXFP8 with
# every GEMM on the Gluon FP8-tensor-core kernel (a gemm_paths table rule, no code change):
# the layer, and a profiled 125m step, to see that kernel at training shapes on real data.
#     run: timeout 590 bash benchmarks/sessions/run_session33c_gpu.sh      (carry: .whl)
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=22 step 200 bench_linear.txt python3 benchmarks/bench_linear.py \
  --recipes nvfp4,nvfp4_no_sr,mxfp8,fp8_blockwise,fp8_tensorwise,fp8_blockwise@compile,bf16@compile \
  --torchao --profile nvfp4
MICROSCALE_NVFP4_ROW1_EXP=1 TAIL=6 step 80 bench_linear_row1.txt python3 \
  benchmarks/bench_linear.py --recipes nvfp4,nvfp4_no_sr
echo '[{"family": "mxfp8", "path": "fp8"}]' > /tmp/mx8_fp8.json
MICROSCALE_GEMM_TABLE=/tmp/mx8_fp8.json TAIL=6 step 60 bench_linear_mx8tc.txt python3 \
  benchmarks/bench_linear.py --recipes mxfp8
MICROSCALE_GEMM_TABLE=/tmp/mx8_fp8.json TAIL=6 step 200 train_125m_mx8tc.txt python3 \
  benchmarks/bench_train.py --graph step --warmup 2 --steps 6 --models 125m \
  --recipes bf16,mxfp8 --profile mxfp8
