#!/usr/bin/env bash
# Multi-GPU scaling of the harness (issue 13): 125m with nvfp4 and fp8_blockwise, 1 GPU vs
# 2 GPUs (FSDP2, quantized weight all-gather; fp32 all-gather for the recipes in FP32_AG) at the
# same global batch, data order and seed. The seed band: the 1-GPU run with seeds 0 and 1, run
# side by side (one per GPU). A tiny FSDP smoke run goes first.
# Writes under $OUT: one run directory per configuration (metrics.jsonl, config.json), the
# logs, exit_codes.txt and dist_scaling.json (one JSON line: tokens/s, speedups, final losses,
# all-gather bytes). Plot: python benchmarks/plot_dist.py $OUT docs/results/distributed_h200x2
#     RECIPES=nvfp4,fp8_blockwise MODEL=125m STEPS=40 BATCH=128 SEQ=1024 FP32_AG=nvfp4 \
#         GRAPH=0 bash benchmarks/run_dist_gpu.sh
# Budget: under 8 minutes on two H200s (5 timed slots of RUN_SECS + the smoke run; a cut run
# still reports the steps it logged; tokens/s is the median over logged windows after step 10).
# The global batch is large (128 x 1024) on purpose: a step that is not one CUDA graph pays
# ~0.2 s of host time at 125m (benchmarks/bench_host.py), so a small per-GPU batch measures the
# host, not the GPUs. dist_runs.tgz holds every run's logs, metrics.jsonl and config.json.
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
export NCCL_NVLS_ENABLE=0          # NVLink multicast (NVLS) stays off on the lent machines
RECIPES=${RECIPES:-nvfp4,fp8_blockwise}; MODEL=${MODEL:-125m}; STEPS=${STEPS:-40}
BATCH=${BATCH:-128}; SEQ=${SEQ:-1024}; NGPU=${NGPU:-2}; RUN_SECS=${RUN_SECS:-80}; FP32_AG=${FP32_AG:-nvfp4}
# GRAPH=1: every run (1 GPU and FSDP2) replays its steps from one CUDA graph (--cuda-graph)
GRAPH_ARG=(); [ "${GRAPH:-0}" = 1 ] && GRAPH_ARG=(--cuda-graph)
COMMON=(train --model "$MODEL" --steps "$STEPS" --batch-size "$BATCH" --seq-len "$SEQ"
        --eval-every 100000 --eval-batches 4 --ckpt-every 0 --log-every 5 --no-progress
        "${GRAPH_ARG[@]}")
port=29500
single() {  # single NAME GPU EXTRA...: a one-process run on one GPU
  local name=$1 gpu=$2; shift 2
  CUDA_VISIBLE_DEVICES=$gpu timeout "$RUN_SECS" python3 -m microscale.train.cli "${COMMON[@]}" "$@" \
    --out "$OUT/$name" > "$OUT/$name.log" 2>&1
  echo "$name: exit $?" | tee -a "$OUT/exit_codes.txt"
}
multi() {   # multi NAME SECS ARGS...: an NGPU torchrun job
  local name=$1 secs=$2; shift 2
  port=$((port + 1))
  timeout "$secs" torchrun --nproc_per_node "$NGPU" --master_port "$port" \
    -m microscale.train.cli "$@" --out "$OUT/$name" > "$OUT/$name.log" 2>&1
  echo "$name: exit $?" | tee -a "$OUT/exit_codes.txt"
}
multi smoke_tiny_fsdp 60 train --model tiny --steps 3 --batch-size 8 --seq-len 128 --eval-every 100000 \
  --eval-batches 1 --ckpt-every 0 --no-progress --recipe "${SMOKE_RECIPE:-fp8_blockwise}" \
  --dist fsdp --all-gather auto \
  "${GRAPH_ARG[@]}"
tail -5 "$OUT/smoke_tiny_fsdp.log"
for recipe in ${RECIPES//,/ }; do
  single "${recipe}_1gpu_s0" 0 --recipe "$recipe" --seed 0 &
  single "${recipe}_1gpu_s1" 1 --recipe "$recipe" --seed 1 &
  wait
  multi "${recipe}_${NGPU}gpu_fsdp_quantized" "$RUN_SECS" "${COMMON[@]}" --recipe "$recipe" --dist fsdp --all-gather quantized
  if [[ ",$FP32_AG," == *",$recipe,"* ]]; then
    multi "${recipe}_${NGPU}gpu_fsdp_fp32" "$RUN_SECS" "${COMMON[@]}" --recipe "$recipe" --dist fsdp --all-gather fp32
  fi
done
for f in "$OUT"/*.log; do echo "== $f"; grep -v '^USDT\|^DEBUG' "$f" | tail -4; done
python3 - "$OUT" "$RECIPES" "$MODEL" "$NGPU" <<'PY' | tee "$OUT/dist_scaling.json"
import json, pathlib, statistics, sys
import torch
out, recipes, model, ngpu = pathlib.Path(sys.argv[1]), sys.argv[2].split(","), sys.argv[3], int(sys.argv[4])
def summary(run):
    path = out / run / "metrics.jsonl"
    if not path.exists():
        return None
    rows = [json.loads(line) for line in path.open()]
    rows = [r for r in rows if "tok_per_s" in r]
    if not rows:
        return None
    steady = [r["tok_per_s"] for r in rows if r["step"] > 10] or [r["tok_per_s"] for r in rows]
    return {"steps": rows[-1]["step"], "tok_per_s": statistics.median(steady),
            "final_loss": rows[-1]["loss"], "val_loss": rows[-1].get("val_loss")}
from microscale.distributed import all_gather_bytes
from microscale.recipe import Recipe
from microscale.train.model import build_model
import microscale as ms
result = {"model": model, "gpus": ngpu, "torch": torch.__version__,
          "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"}
for recipe in recipes:
    one = summary(f"{recipe}_1gpu_s0")
    entry = {"1gpu_s0": one, "1gpu_s1": summary(f"{recipe}_1gpu_s1")}
    for ag in ("quantized", "fp32"):
        many = summary(f"{recipe}_{ngpu}gpu_fsdp_{ag}")
        if many is None:
            continue
        entry[f"{ngpu}gpu_fsdp_{ag}"] = many
        if one:
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
# the device tool returns few files: everything goes back in one archive
(cd "$OUT" && tar czf dist_runs.tgz --exclude=checkpoints */metrics.jsonl */config.json *.log \
   exit_codes.txt env.txt dist_scaling.json && find . -mindepth 1 ! -name dist_runs.tgz \
   ! -name dist_scaling.json -exec rm -rf {} +)
