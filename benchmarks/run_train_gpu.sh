#!/usr/bin/env bash
# One device call for the training-speed work: GPU tests, an NVFP4 kernel A/B, then the
# end-to-end benchmark. Every step is optional and time-limited; logs land under $OUT.
#     TESTS="tests/test_train_gpu.py" MODELS=125m,1b TORCHAO=1 GRAPH=step \
#         PASSES=v3,rows PROFILE=nvfp4 bash benchmarks/run_train_gpu.sh
# torchao (the optional peer) installs from wheels carried in .whl/ when present.
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
if [ -n "${TESTS:-}" ]; then
  timeout "${TEST_SECS:-240}" python3 -m pytest -q -m gpu -p no:cacheprovider --maxfail=10 $TESTS \
    ${TEST_K:+-k "$TEST_K"} 2>&1 | grep -v '^USDT\|^DEBUG' | tee "$OUT/gpu_tests.log" | tail -15
fi
if [ -n "${PASSES:-}" ]; then   # NVFP4 quantize pass A/B at the training shapes; keep the faster
  timeout "${QUANT_SECS:-120}" python3 benchmarks/bench_quant.py --no-ref --only "${QONLY:-nvfp4/rowcol,nvfp4/col,nvfp4/1x16,nvfp4/2d}" \
    --passes "$PASSES" --shapes "${QSHAPES:-16384x768,16384x3072,8192x8192}" 2>&1 \
    | grep -v '^USDT' | tee "$OUT/bench_quant.log" | grep -v '^{' | tail -40
  best=$(python3 - "$OUT/bench_quant.log" <<'PY'
import json, sys
rows = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["results"]
tot = {}
for r in rows:
    if r["variant"].startswith("nvfp4/rowcol") and r.get("us_graph"):
        tot[r["pass"]] = tot.get(r["pass"], 0.0) + r["us_graph"]
print(min(tot, key=tot.get) if tot else "v3")
PY
)
  echo "NVFP4 pass for the training benchmark: $best" | tee -a "$OUT/env.txt"
  export MICROSCALE_NVFP4_PASS=$best
fi
timeout "${BENCH_SECS:-330}" python3 benchmarks/bench_train.py --models "${MODELS:-125m}" \
  ${TORCHAO:+--torchao} ${PROFILE:+--profile $PROFILE} ${RECIPES:+--recipes $RECIPES} \
  --graph "${GRAPH:-none}" ${BF16_ALSO:+--bf16-also $BF16_ALSO} ${EXTRA:-} \
  --out "$OUT/bench_train.json" 2>&1 | grep -v '^USDT\|^DEBUG' | tee "$OUT/bench_train.log" \
  | grep -v '^{' | tail -40
