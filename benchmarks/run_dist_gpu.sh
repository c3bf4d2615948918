#!/usr/bin/env bash
# Multi-GPU scaling of the harness (issue 13): 125m with nvfp4 and fp8_blockwise, 1 GPU vs
# 2 GPUs (FSDP2; quantized and fp32 weight all-gather) at the same global batch and data order.
# Writes under $OUT: one run directory per configuration (metrics.jsonl, config.json), the
# logs, and dist_scaling.json (one JSON line: tokens/s, speedups, final losses, all-gather bytes).
#     RECIPES=nvfp4,fp8_blockwise MODEL=125m STEPS=40 BATCH=16 SEQ=1024 AG=quantized,fp32 \
#         bash benchmarks/run_dist_gpu.sh
# Budget: under 9 minutes on two H200s: 6 runs, each cut at RUN_SECS (a cut run still reports
# the steps it logged; tokens/s is the median over steps after the first 10).
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
export NCCL_NVLS_ENABLE=0          # NVLink multicast (NVLS) stays off on the lent machines
RECIPES=${RECIPES:-nvfp4,fp8_blockwise}; MODEL=${MODEL:-125m}; STEPS=${STEPS:-40}
BATCH=${BATCH:-16}; SEQ=${SEQ:-1024}; NGPU=${NGPU:-2}; RUN_SECS=${RUN_SECS:-85}; AG=${AG:-quantized,fp32}
COMMON=(train --model "$MODEL" --steps "$STEPS" --batch-size "$BATCH" --seq-len "$SEQ"
        --eval-every 100000 --eval-batches 2 --ckpt-every 0 --log-every 5 --no-progress)
port=29500
run() {   # run NAME NPROC EXTRA...: one training run, its log and its exit code
  local name=$1 nproc=$2; shift 2
  port=$((port + 1))
  if [ "$nproc" = 1 ]; then
    timeout "$RUN_SECS" python3 -m microscale.train.cli "${COMMON[@]}" "$@" --out "$OUT/$name" \
      > "$OUT/$name.log" 2>&1
  else
    timeout "$RUN_SECS" torchrun --nproc_per_node "$nproc" --master_port "$port" \
      -m microscale.train.cli "${COMMON[@]}" "$@" --out "$OUT/$name" > "$OUT/$name.log" 2>&1
  fi
  echo "$name: exit $?" | tee -a "$OUT/exit_codes.txt"
}
for recipe in ${RECIPES//,/ }; do
  run "${recipe}_1gpu" 1 --recipe "$recipe"
  for ag in ${AG//,/ }; do
    run "${recipe}_${NGPU}gpu_fsdp_${ag}" "$NGPU" --recipe "$recipe" --dist fsdp --all-gather "$ag"
  done
done
python3 - "$OUT" "$RECIPES" "$MODEL" "$NGPU" <<'PY' | tee "$OUT/dist_scaling.json"
import json, pathlib, statistics, sys
import torch
out, recipes, model, ngpu = pathlib.Path(sys.argv[1]), sys.argv[2].split(","), sys.argv[3], int(sys.argv[4])
def summary(run):
    path = out / run / "metrics.jsonl"
    if not path.exists():
        return None
    rows = [json.loads(line) for line in path.open()]
    if not rows:
        return None
    steady = [r["tok_per_s"] for r in rows if r["step"] > 10] or [r["tok_per_s"] for r in rows]
    return {"steps": rows[-1]["step"], "tok_per_s": statistics.median(steady),
            "final_loss": rows[-1]["loss"], "val_loss": rows[-1].get("val_loss"),
            "losses": [r["loss"] for r in rows]}
from microscale.distributed import all_gather_bytes
from microscale.recipe import Recipe
from microscale.train.model import build_model
import microscale as ms
result = {"model": model, "gpus": ngpu, "torch": torch.__version__,
          "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"}
for recipe in recipes:
    one = summary(f"{recipe}_1gpu")
    entry = {"1gpu": one}
    for ag in ("quantized", "fp32"):
        many = summary(f"{recipe}_{ngpu}gpu_fsdp_{ag}")
        entry[f"{ngpu}gpu_fsdp_{ag}"] = many
        if one and many:
            entry[f"speedup_{ag}"] = many["tok_per_s"] / one["tok_per_s"]
    net = build_model(model, 256)
    ms.convert(net, Recipe.from_name(recipe))
    try:
        entry["all_gather_bytes"] = all_gather_bytes(net, ngpu)["per_step"]
    except ValueError as err:
        entry["all_gather_bytes"] = str(err)
    result[recipe] = entry
print(json.dumps(result))
PY
