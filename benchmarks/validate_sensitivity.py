"""Does ``ms.analyze`` find the layers worth keeping in BF16? A small end-to-end check.

1. Train the harness model (default ``tiny``) in bf16 for ``--steps`` steps (this run is also
   the bf16 baseline below).
2. ``ms.analyze`` the trained model under ``nvfp4`` on a fixed validation batch (loss: the
   next-token cross-entropy); write the report, its heatmap and depth plot.
3. Ranking vs depth: where do the top ``ceil(budget · n_layers)`` layers sit, and the Spearman
   correlation between a layer's block index and its sensitivity, oriented so that positive
   means "deeper layers are more sensitive" (the paper keeps the *last* blocks in high
   precision, so it predicts a positive correlation). ``--also-metrics`` reports the same
   for other ranking metrics.
4. Train, from the same init on the same batches, ``nvfp4`` with: nothing kept in BF16, the
   recommended set kept, the same number of first-block layers kept, as many layers drawn at
   random (a control), and (``--with-default``) the recipe's default (last 15% of blocks). The fraction of the nvfp4→bf16 validation-loss gap
   each keep-set closes is ``(L_none - L_keep) / (L_none - L_bf16)``.

``--seeds`` repeats all of it per seed (init, data order and SR noise all change with it).
Writes ``results.json``, ``README.md`` (the table), ``analysis.json`` and PNGs to ``--out``.
Run: ``python benchmarks/validate_sensitivity.py --device cpu --out docs/results/sensitivity``.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import time
from pathlib import Path

import torch

from microscale.analysis import analyze
from microscale.analysis.monitor import lm_loss
from microscale.analysis.plots import plot_report
from microscale.analysis.report import block_of
from microscale.train.trainer import TrainConfig, Trainer


def _train(args, recipe: str, keep, tag: str) -> dict:
    keep_hp = ",".join(keep) if isinstance(keep, list) else keep     # the --keep-hp syntax
    cfg = TrainConfig(recipe=recipe, model=args.model, steps=args.steps, batch_size=args.batch_size,
                      seq_len=args.seq_len, lr=args.lr, seed=args.seed, device=args.device,
                      keep_hp=keep_hp, out=str(Path(args.work) / tag), eval_every=args.steps,
                      eval_batches=args.eval_batches, ckpt_every=0, progress=False)
    t0 = time.perf_counter()
    trainer = Trainer(cfg)
    final = trainer.fit()
    losses = [json.loads(line)["loss"] for line in (Path(cfg.out) / "metrics.jsonl").read_text().splitlines()]
    print(f"  {tag:<12} val {final['val_loss']:.4f}  ({time.perf_counter() - t0:.0f} s)", flush=True)
    return {"tag": tag, "recipe": recipe, "keep": keep, "val_loss": final["val_loss"],
            "train_loss": losses, "seconds": time.perf_counter() - t0, "trainer": trainer}


def _spearman(xs: list[float], ys: list[float]) -> float:
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):                    # average ranks over ties
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    var = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return cov / var if var else 0.0


def _ranking_summary(report, budget: float, metric: str) -> dict:
    blocks = []
    for name in report.names:
        if block_of(name) not in blocks:
            blocks.append(block_of(name))
    block_idx = {n: blocks.index(block_of(n)) for n in report.names}
    ranked = report.rank(metric)
    keep = report.recommend(budget, metric=metric)
    sign = -1.0 if metric.endswith("sqnr_db") else 1.0    # oriented: larger = more sensitive
    values = {n: sign * v for n, v in ranked}
    n_last = math.ceil(budget * len(blocks))
    last_blocks = set(range(len(blocks) - n_last, len(blocks)))
    return {
        "metric": metric, "ranking": ranked, "recommended": keep,
        "recommended_blocks": [block_idx[n] for n in keep],
        "frac_recommended_in_last_blocks": sum(block_idx[n] in last_blocks for n in keep) / len(keep),
        "last_blocks": sorted(last_blocks), "n_blocks": len(blocks),
        "spearman_depth_vs_sensitivity": _spearman([block_idx[n] for n in report.names],
                                                   [values[n] for n in report.names]),
        "mean_by_block": [sign * sum(values[n] for n in report.names if block_idx[n] == b)
                          / sum(1 for n in report.names if block_idx[n] == b) for b in range(len(blocks))],
    }


def _plot_losses(runs: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for run in runs:
        y = run["train_loss"]
        w = max(1, len(y) // 20)
        smooth = [sum(y[max(0, i - w + 1):i + 1]) / len(y[max(0, i - w + 1):i + 1]) for i in range(len(y))]
        ax.plot(range(1, len(y) + 1), smooth, label=f"{run['tag']} (val {run['val_loss']:.3f})", lw=1.2)
    ax.set_xlabel("step")
    ax.set_ylabel(f"train loss (moving mean of {w})")
    ax.set_ylim(top=min(max(r["train_loss"][len(r["train_loss"]) // 4] for r in runs) + 0.1, 6))
    ax.legend(fontsize=8)
    ax.set_title("nvfp4 with different BF16 keep-sets vs bf16")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _one_seed(args, seed: int, out: Path, first: bool) -> tuple[dict, list[dict]]:
    """bf16 run, analysis, and the nvfp4 keep-set runs for one seed."""
    args = argparse.Namespace(**{**vars(args), "seed": seed, "work": f"{args.work}/seed{seed}"})
    print(f"seed {seed}: 1. bf16 training", flush=True)
    bf16 = _train(args, "bf16", None, "bf16")
    model = bf16.pop("trainer").model
    print("  2. analysis of the trained model under nvfp4", flush=True)
    ids, targets = (t.to(args.device) for t in bf16_val_batch(args))
    model.eval()
    report = analyze(model, (ids,), "nvfp4", lambda logits, _b: lm_loss(logits, (ids, targets)))
    if first:
        report.to_json(out / "analysis.json")
        plot_report(report, out)
        (out / "analysis_table.txt").write_text(str(report) + "\n")
    summary = _ranking_summary(report, args.budget, args.metric)
    keep = summary["recommended"]
    first_n = report.names[:len(keep)]
    rand = sorted(random.Random(1000 + seed).sample(report.names, len(keep)))
    summary.update(first_n=first_n, random=rand, other_metrics={
        m: {k: v for k, v in _ranking_summary(report, args.budget, m).items()
            if k in ("spearman_depth_vs_sensitivity", "recommended_blocks",
                     "frac_recommended_in_last_blocks")} for m in args.also_metrics})
    print(f"   recommended {keep}\n   spearman(depth, sensitivity) = "
          f"{summary['spearman_depth_vs_sensitivity']:.3f}", flush=True)
    print("  3. nvfp4 trainings", flush=True)
    runs = [bf16, _train(args, "nvfp4", "none", "nvfp4_none"),
            _train(args, "nvfp4", keep, "nvfp4_recommended"),
            _train(args, "nvfp4", first_n, "nvfp4_firstN"),
            _train(args, "nvfp4", rand, "nvfp4_random")]
    if args.with_default:
        runs.append(_train(args, "nvfp4", None, "nvfp4_default"))
    l_bf16, l_none = runs[0]["val_loss"], runs[1]["val_loss"]
    for r in runs:
        r.pop("trainer", None)
        r["seed"] = seed
        if r["recipe"] != "bf16":
            r["gap_closed"] = (l_none - r["val_loss"]) / (l_none - l_bf16) if l_none != l_bf16 else float("nan")
    if first:
        _plot_losses(runs, out / "loss_curves.png")
    return summary, runs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="tiny")
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--eval-batches", type=int, default=16)
    p.add_argument("--budget", type=float, default=0.15)
    p.add_argument("--metric", default="sensitivity")
    p.add_argument("--also-metrics", nargs="*", default=[
        "wgrad.dw/rel_err", "fprop.y/rel_err", "dgrad.dx/rel_err", "wgrad.x/sqnr_db", "fprop.x/sqnr_db"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--with-default", action="store_true", help="also train the default keep-set")
    p.add_argument("--work", default="runs/validate_sensitivity")
    p.add_argument("--out", default="docs/results/sensitivity")
    p.add_argument("--readme-only", metavar="RESULTS_JSON", default=None,
                   help="only rewrite README.md next to an existing results.json")
    args = p.parse_args()
    if args.readme_only:
        path = Path(args.readme_only)
        results = json.loads(path.read_text())
        path.with_name("README.md").write_text(_readme(results, results["runs"]))
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    summaries, runs = [], []
    device = torch.cuda.get_device_name() if args.device.startswith("cuda") else \
        f"{platform.machine()} CPU, {torch.get_num_threads()} threads"
    for i, seed in enumerate(args.seeds):
        summary, seed_runs = _one_seed(args, seed, out, first=i == 0)
        summaries.append({"seed": seed, **summary})
        runs += seed_runs
        done = argparse.Namespace(**{**vars(args), "seeds": args.seeds[:i + 1]})
        results = {"args": vars(done), "hardware": f"{device}, torch {torch.__version__}",
                   "total_seconds": time.perf_counter() - t_start, "analysis": summaries,
                   "runs": [{k: v for k, v in r.items() if k != "train_loss"} for r in runs]}
        (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")   # after each seed
        (out / "README.md").write_text(_readme(results, runs))
    print((out / "README.md").read_text())


def bf16_val_batch(args) -> tuple[torch.Tensor, torch.Tensor]:
    """The first fixed validation batch of the run's data (what the CLI analyzes too)."""
    from microscale.train.data import BatchSampler, load_data
    sampler = BatchSampler(load_data(None), args.batch_size, args.seq_len, args.seed)
    return sampler.val_batches(1)[0]


def _readme(results: dict, runs: list[dict]) -> str:
    a = results["args"]
    lines = [
        "# Sensitivity validation (generated by `benchmarks/validate_sensitivity.py`)", "",
        f"Model `{a['model']}`, {a['steps']} steps, batch {a['batch_size']}×{a['seq_len']}, lr "
        f"{a['lr']}, seeds {a['seeds']}, device {a['device']} ({results['hardware']}); total "
        f"{results['total_seconds']:.0f} s. Ranking metric `{a['metric']}`, budget {a['budget']}.", "",
        "| seed | recommended (block of each) | in last block(s) | Spearman(block, sensitivity) |",
        "|---|---|---|---|"]
    for s in results["analysis"]:
        lines.append(f"| {s['seed']} | {', '.join(s['recommended'])} ({s['recommended_blocks']}) | "
                     f"{s['frac_recommended_in_last_blocks']:.2f} | "
                     f"{s['spearman_depth_vs_sensitivity']:+.3f} |")
    others = results["analysis"][0].get("other_metrics", {})
    if others:
        lines += ["", "Other ranking metrics, Spearman(block, sensitivity) per seed (blocks of the "
                  "top layers, first seed):", "", "| metric | Spearman per seed | top-layer blocks |",
                  "|---|---|---|"]
        for m in others:
            rho = ", ".join(f"{s['other_metrics'][m]['spearman_depth_vs_sensitivity']:+.3f}"
                            for s in results["analysis"])
            lines.append(f"| `{m}` | {rho} | {others[m]['recommended_blocks']} |")
    lines += ["", "Final validation loss; gap closed = (L_none − L) / (L_none − L_bf16) on the "
              "seed-mean losses (meaningless where that gap is within seed noise).", "",
              "| run | BF16 layers | " + " | ".join(f"seed {s}" for s in a["seeds"])
              + " | mean val loss | gap closed (of means) |",
              "|---|---|" + "---|" * len(a["seeds"]) + "---|---|"]
    tags = list(dict.fromkeys(r["tag"] for r in runs))
    means = {t: sum(r["val_loss"] for r in runs if r["tag"] == t)
             / sum(1 for r in runs if r["tag"] == t) for t in tags}
    for tag in tags:
        rs = [r for r in runs if r["tag"] == tag]
        keep = rs[0]["keep"]
        keep = "all" if rs[0]["recipe"] == "bf16" else ("none" if keep == "none" else
               "default (last 15% of blocks)" if keep is None else f"{len(keep)} layers")
        cells = " | ".join(f"{r['val_loss']:.4f}" for r in rs)
        mean = means[tag]
        gap = "-" if rs[0]["recipe"] == "bf16" else \
            f"{(means['nvfp4_none'] - mean) / (means['nvfp4_none'] - means['bf16']):+.2f}"
        lines.append(f"| {tag} | {keep} | {cells} | {mean:.4f} | {gap} |")
    lines += ["", "Plots (first seed): `analysis_heatmap.png`, `analysis_depth.png`, `loss_curves.png`.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
