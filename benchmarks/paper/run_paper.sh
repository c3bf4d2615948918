#!/usr/bin/env bash
# One device call of the paper-reproduction queue (issue 14): continue the queue from the
# checkpoints on this machine's disk for BUDGET_S seconds, then pack the compact logs into $OUT.
#     BUDGET_S=555 CKPT=/root/paper bash benchmarks/paper/run_paper.sh        # one H200, < 10 min
#     ONLY=bf16_s0,fidelity GPUS=2 bash benchmarks/paper/run_paper.sh         # a subset, 2 GPUs
# $OUT gets paper_runs.tgz (unpack into docs/results/paper_reproduction/runs/), driver.log,
# queue.md and env.txt. Jobs already done in the committed runs/ are skipped. Checkpoints stay
# in $CKPT: they survive only while this machine is held, so call again promptly (30 s warm);
# LAST=1 (a session's last call) starts no job that cannot finish in this call. SETTING=check
# (or smoke) runs a scaled-down queue to check the path; it ignores the committed runs.
set -uo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/gpu_env.sh                       # $OUT, PYTHONPATH=src, env.txt
CKPT=${CKPT:-/root/paper}; BUDGET_S=${BUDGET_S:-555}
GPUS=${GPUS:-$(nvidia-smi -L 2>/dev/null | wc -l)}
mkdir -p "$CKPT"
extra=(--repo-results docs/results/paper_reproduction/runs)        # jobs committed as done: skipped
[ -n "${SETTING:-}" ] && extra=(--setting "$SETTING")
[ -n "${ONLY:-}" ] && extra+=(--only "$ONLY")
[ -n "${REDO:-}" ] && extra+=(--redo "$REDO")
[ -n "${LAST:-}" ] && extra+=(--no-split)
for kv in ${SET:-}; do extra+=("--set=$kv"); done                  # e.g. SET="cuda_graph=false"
python3 benchmarks/paper/driver.py run --budget-s "$BUDGET_S" --ckpt-dir "$CKPT" --out "$OUT" \
  --gpus "$GPUS" "${extra[@]}" 2>&1 | grep --line-buffered -v '^USDT' | tee "$OUT/driver.log"
