#!/usr/bin/env bash
# Session 28, call 5 (one H100, ~2 minutes): why each later bench_train run peaked ~67 MB
# higher. Hypothesis: a cuBLAS workspace kept per stream that ran a GEMM, one new warm-up
# stream per capture. Shows allocated memory after GEMMs on fresh streams vs on one stream,
# the GPU test of speed.warmup_stream, and bench_train's peaks at "tiny" over four runs.
#     run: timeout 200 bash benchmarks/sessions/run_session28e_gpu.sh
set -uo pipefail
REAL_OUT=${OUT:-gpu_out}; export OUT=/tmp/s28e; mkdir -p "$REAL_OUT"
source "$(dirname "$0")/../gpu_env.sh"
pack() { tar czf "$REAL_OUT/session28e.tgz" -C "$OUT" .; }
step 30 streams.log python3 - <<'PY'
import torch
x = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
torch.mm(x, x); torch.cuda.synchronize()
m0 = torch.cuda.memory_allocated()
for name, fresh in (("fresh stream each", True), ("one stream", False)):
    one = torch.cuda.Stream()
    for i in range(3):
        s = torch.cuda.Stream() if fresh else one
        with torch.cuda.stream(s):
            torch.mm(x, x)
        torch.cuda.synchronize()
        print(f"{name}: after {i + 1}: +{(torch.cuda.memory_allocated() - m0) / 2**20:.1f} MiB")
PY
pack
TAIL=4 step 40 gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/test_train_gpu.py -k "warmup_runs_on_one_stream"
pack
TAIL=8 step 100 train_tiny.log python3 benchmarks/bench_train.py --graph step --warmup 2 \
  --steps 3 --models tiny --recipes bf16,fp8_tensorwise,bf16@s27,fp8_tensorwise@s27 \
  --out "$OUT/train_tiny.json"
pack
