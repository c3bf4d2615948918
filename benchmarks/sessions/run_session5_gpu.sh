#!/usr/bin/env bash
# One device call (issues 11, 13, 18; 2026-11-23, session 5), every step time-limited, all
# results returned in one archive ($OUT/session5.tgz):
#   1. GPU tests: FSDP2 + --cuda-graph on one NCCL rank, the Triton grouped GEMM, the MoE path;
#   2. the FP8 1x128 row + column quantizer: tile sweep incl. non-persistent grids, and Nsight
#      Compute counters of the default kernel at 16384x3072;
#   3. bench_moe.py: grouped GEMMs (Triton grouped kernel) at DeepSeek-V3 and Qwen3 shapes;
#   4. bench_train.py 125m with per-block CUDA graphs (--compile blocks --mode reduce-overhead,
#      no step graph), bf16 and the quantized recipes in one process.
#     OUT=... bash benchmarks/sessions/run_session5_gpu.sh
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
TAIL=12 step "${TEST_SECS:-150}" gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  --maxfail=10 tests/test_gemm_grouped.py tests/test_grouped_gpu.py tests/test_train_gpu.py \
  -k "grouped or fsdp2_cuda_graph"
TAIL=30 step "${QUANT_SECS:-100}" fp8_rowcol_sweep.log python3 benchmarks/bench_quant.py --no-ref \
  --only fp8_block/1x128_rowcol --shapes 16384x3072 --sweep --sweep-shapes 16384x768,16384x3072 \
  --sweep-only fp8_block/1x128_rowcol
NCU_BIN=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU_BIN" ]; then
  TAIL=5 step "${NCU_SECS:-90}" ncu_fp8_rowcol.log "$NCU_BIN" --clock-control none \
    -k regex:fp8_rowcol --launch-skip 2 --launch-count 1 --section SpeedOfLight \
    --section Occupancy --section LaunchStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section SchedulerStats \
    python3 benchmarks/bench_quant.py --no-ref --only fp8_block/1x128_rowcol --shapes 16384x3072
fi
TAIL=30 step "${MOE_SECS:-120}" bench_moe.log python3 benchmarks/bench_moe.py --no-train \
  --recipes "${MOE_RECIPES:-fp8_blockwise,nvfp4,mxfp8}"
TAIL=30 step "${TRAIN_SECS:-240}" train_125m_per_block_graphs.log python3 benchmarks/bench_train.py \
  --models 125m --recipes "${RECIPES:-bf16,fp8_blockwise,nvfp4,fp8_tensorwise}" --graph none \
  --compile blocks --mode reduce-overhead --steps 10 --out "$OUT/train_125m_per_block_graphs.json"
pack_out session5.tgz
