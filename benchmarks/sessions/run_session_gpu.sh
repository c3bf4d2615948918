#!/usr/bin/env bash
# One device call closing a session's speed work (~9 min on one H200): GPU tests of the new
# kernels, the MXFP8 GEMM bench (QUICK), an A/B of the FP8 1x128 row+column kernels (the faster
# becomes MICROSCALE_FP8_ROWCOL for the training benchmark), then bench_train at 125m (every
# recipe) and 1b (MODELS_1B_RECIPES). Every step is time-limited; logs under $OUT.
set -uo pipefail
source "$(dirname "$0")/../gpu_env.sh"
TAIL=${TAIL:-25}
step "${TEST_SECS:-110}" gpu_tests.log python3 -m pytest -q -m gpu -p no:cacheprovider -rf \
  tests/test_kernels_mxfp8.py tests/test_grouped_gpu.py tests/test_kernels_quant.py \
  -k "${TEST_K:-not every_sweep_config}"
step "${GEMM_SECS:-70}" bench_mxfp8.log python3 benchmarks/bench_gemm.py --quick --variants \
  bf16,mxfp8_e4m3/fp8,mxfp8_e4m3/dequant,fp8_block/torch
step "${SWEEP_SECS:-70}" fp8_rowcol.log python3 benchmarks/bench_quant.py --no-ref \
  --only fp8_block/1x128_rowcol --shapes 16384x768 --sweep --sweep-shapes 16384x768,16384x3072 \
  --sweep-only fp8_block/1x128_rowcol
best=$(python3 - "$OUT/fp8_rowcol.log" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
tot = {}
for r in json.loads(lines[-1]).get("sweep", []) if lines else []:
    cfg = r.get("config", "")
    default = (cfg.startswith("ROWCOL=tile,num_warps_rowcol=4,PROGS_PER_SM_rowcol=4,") or
               cfg.startswith("ROWCOL=sub,") and
               cfg.endswith("SUB_ROWS=64,num_warps_sub=8,PROGS_PER_SM_sub=4"))
    if r.get("us_graph") and default:                   # each mode with its default config
        mode = r["config"].split(",")[0].split("=")[1]
        tot.setdefault(mode, {}).setdefault(r["config"], 0.0)
        tot[mode][r["config"]] += r["us_graph"]
best = {m: min(v.values()) for m, v in tot.items()}
print(min(best, key=best.get) if best else "tile")
PY
)
echo "FP8 1x128 row+column kernel for the training benchmark: $best" | tee -a "$OUT/env.txt"
export MICROSCALE_FP8_ROWCOL=$best
TAIL=14 step "${BENCH_SECS:-200}" bench_train_125m.log python3 benchmarks/bench_train.py \
  --models 125m --graph step --steps 8 --warmup 2 --profile fp8_blockwise \
  --out "$OUT/bench_train_125m.json"
TAIL=10 step "${BENCH1B_SECS:-170}" bench_train_1b.log python3 benchmarks/bench_train.py \
  --models 1b --graph step --steps 6 --warmup 2 \
  --recipes "${MODELS_1B_RECIPES:-bf16,fp8_tensorwise,fp8_blockwise,nvfp4}" \
  --out "$OUT/bench_train_1b.json"
