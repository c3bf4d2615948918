#!/usr/bin/env bash
# Session 26, call 2 (one H100): SR seeds drawn as int32 (no int64 -> int32 copy per quantize
# call); does CUDA's randint give the same values in int32 and int64? The GPU tests of the
# SR layers and steps; then 125m nvfp4 / nvfp4_no_sr against "@nogroup" again, the order of
# call 1 reversed, both nvfp4 variants profiled.
#     run: timeout 590 bash benchmarks/sessions/run_session26b_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s26b; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
export TRITON_CACHE_DIR=/tmp/tcache
pack() { tar czf "$REAL_OUT/session26b.tgz" -C "$OUT" .; }
step 30 randint.log python3 -c "
import torch
for seed in (0, 3, 12345):
    torch.manual_seed(seed); a = torch.randint(0, 2**31 - 1, (64,), device='cuda', dtype=torch.int64)
    torch.manual_seed(seed); b = torch.randint(0, 2**31 - 1, (64,), device='cuda', dtype=torch.int32)
    print('seed', seed, 'int32 draw == int64 draw:', torch.equal(a, b.long()))"
TAIL=8 step 200 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_train_gpu.py tests/test_mlp.py -k "no_host_sync or replays_the_training_step or (same_bits_on_cuda and nvfp4)"
pack
TAIL=8 step 330 train_125m.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 8 --models 125m --profile nvfp4,nvfp4@nogroup \
  --recipes bf16,nvfp4@nogroup,nvfp4,nvfp4_no_sr@nogroup,nvfp4_no_sr \
  --out "$OUT/train_125m.json"
pack
