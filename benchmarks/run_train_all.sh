#!/usr/bin/env bash
# The training-speed results in one device call (H200, ~10 min): GPU tests of the kernels and
# the training step, then bench_train at every size with the whole step in a CUDA graph.
#     OUT=gpu_out bash benchmarks/run_train_all.sh
# torchao (the optional peer) installs from wheels carried in .whl/ when present.
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
timeout "${TEST_SECS:-150}" python3 -m pytest -q -m gpu -p no:cacheprovider --maxfail=8 \
  tests/test_kernels_quant.py tests/test_kernels_gemm.py tests/test_linear.py tests/test_edges.py \
  tests/test_properties.py tests/test_train_gpu.py \
  -k "not no_host_sync and not inductor_layer and not cuda_graph_replays" 2>&1 \
  | grep -v '^USDT\|^DEBUG' > "$OUT/gpu_tests.log"; tail -12 "$OUT/gpu_tests.log"
# hedge: if the default NVFP4 pass cannot run here, the benchmark uses the other one
python3 -c "import torch, microscale as ms; x = torch.randn(256, 256, device='cuda'); \
ms.quantize_rowcol(x, ('nvfp4', {}), ('nvfp4', {'rht': True}), backend='triton')" \
  || { echo "rows pass failed: benchmark with v3" | tee -a "$OUT/env.txt"; export MICROSCALE_NVFP4_PASS=v3; }
B="python3 benchmarks/bench_train.py --graph step --steps 8 --warmup 2"
timeout "${BENCH1_SECS:-270}" $B --models 1b,125m --torchao --out "$OUT/train_1b_125m.json" 2>&1 \
  | grep -v '^USDT\|^DEBUG' > "$OUT/train_1b_125m.log"; grep -v '^{' "$OUT/train_1b_125m.log" | tail -24
timeout "${BENCH2_SECS:-150}" $B --models 350m,50m --out "$OUT/train_350m_50m.json" 2>&1 \
  | grep -v '^USDT\|^DEBUG' > "$OUT/train_350m_50m.log"; grep -v '^{' "$OUT/train_350m_50m.log" | tail -20
