#!/usr/bin/env bash
# The NVFP4 paper's ablations as harness runs, one directory per variant, then the plots.
#   MODEL=tiny STEPS=300 JOBS=2 OUT=runs/ablations bash benchmarks/ablations.sh        # CPU
#   MODEL=50m STEPS=3000 BATCH=32 SEQ=1024 LR=1.5e-3 JOBS=1 bash benchmarks/ablations.sh  # GPU
# Every run uses the same seed and data order; `--resume` lets a run continue across calls.
# Writes OUT/<variant>/metrics.jsonl, OUT/loss.png, OUT/rel_diff.png, OUT/summary.md and packs
# the small outputs (no checkpoints) into OUT.tgz for machines that return few files.
set -euo pipefail
MODEL=${MODEL:-tiny}; STEPS=${STEPS:-300}; JOBS=${JOBS:-2}; OUT=${OUT:-runs/ablations}
BATCH=${BATCH:-8}; SEQ=${SEQ:-128}; LR=${LR:-3e-3}; SEED=${SEED:-0}
CLI=${CLI:-microscale}
common=(--model "$MODEL" --steps "$STEPS" --batch-size "$BATCH" --seq-len "$SEQ" --lr "$LR"
        --seed "$SEED" --lr-schedule wsd --decay-frac 0.18 --no-progress --resume)
# variant name | recipe | extra flags
variants=(
  "bf16|bf16|"
  "nvfp4|nvfp4|"
  "nvfp4_all_layers|nvfp4|--keep-hp none"
  "nvfp4_bf16_switch|nvfp4|--switch-step decay --switch-mode all"
  "nvfp4_no_sr|nvfp4_no_sr|"
  "nvfp4_no_rht|nvfp4_no_rht|"
  "nvfp4_no_2d|nvfp4_no_2d|"
  "nvfp4_base|nvfp4_base|"
  "mxfp4|mxfp4|"
  "fp8_blockwise|fp8_blockwise|"
)
mkdir -p "$OUT"
run() {
  IFS='|' read -r name recipe extra <<<"$1"
  # shellcheck disable=SC2086  # $extra holds separate flags
  $CLI train --recipe "$recipe" "${common[@]}" $extra --out "$OUT/$name" > "$OUT/$name.log" 2>&1 \
    && echo "done $name" || echo "FAILED $name (see $OUT/$name.log)"
}
for v in "${variants[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do sleep 1; done
  run "$v" &
done
wait
$CLI plot "$OUT"/*/ --out "$OUT"
tar czf "${OUT%/}.tgz" --exclude=checkpoints -C "$OUT" .   # beside OUT, not inside it
