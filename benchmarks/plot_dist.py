"""Loss curves of a ``run_dist_gpu.sh`` result: 2-GPU FSDP2 runs over the 1-GPU seed band.

    python benchmarks/plot_dist.py RUNS_DIR OUT_DIR     # RUNS_DIR: dist_runs.tgz unpacked

Per recipe, one panel: the training loss against tokens for the single-GPU runs (seeds 0 and
1: their min-max is the seed band, shaded) and each 2-GPU run (quantized / fp32 all-gather)
on top. The loss plotted is ``loss_avg``, the mean over the logging window (every 5 steps),
so the curves are comparable whatever the log interval. Writes ``OUT_DIR/dist_loss.png`` and
prints, per 2-GPU run, the share of logged points inside the band and the largest distance
outside it (one JSON line).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def load(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    return [r for r in map(json.loads, path.read_text().splitlines()) if "loss_avg" in r]


def band_check(band: list[list[dict]], run: list[dict]) -> dict:
    """Points of ``run`` within [min, max] of the seed runs at the same step."""
    by_step = [{r["step"]: r["loss_avg"] for r in rows} for rows in band]
    inside, outside = 0, 0.0
    common = [r for r in run if all(r["step"] in s for s in by_step)]
    for r in common:
        lo = min(s[r["step"]] for s in by_step)
        hi = max(s[r["step"]] for s in by_step)
        v = r["loss_avg"]
        inside += lo <= v <= hi
        outside = max(outside, lo - v, v - hi)
    return {"points": len(common), "inside_band": inside, "max_outside": outside}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", type=Path)
    p.add_argument("out", type=Path)
    args = p.parse_args(argv)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    recipes = sorted({d.name.split("_1gpu_")[0] for d in args.runs.glob("*_1gpu_s0")})
    if not recipes:
        raise SystemExit(f"no '<recipe>_1gpu_s0' run directories under {args.runs}")
    fig, axes = plt.subplots(1, len(recipes), figsize=(6 * len(recipes), 4.2), squeeze=False)
    summary = {}
    for ax, recipe in zip(axes[0], recipes):
        seeds = [load(args.runs / f"{recipe}_1gpu_s{s}") for s in (0, 1)]
        seeds = [rows for rows in seeds if rows]
        steps = sorted(set.intersection(*(set(r["step"] for r in rows) for rows in seeds)))
        per = [{r["step"]: r for r in rows} for rows in seeds]
        tokens = [per[0][s]["tokens"] / 1e6 for s in steps]
        lo = [min(p[s]["loss_avg"] for p in per) for s in steps]
        hi = [max(p[s]["loss_avg"] for p in per) for s in steps]
        ax.fill_between(tokens, lo, hi, alpha=0.3, color="grey", label="1 GPU, seeds 0-1")
        summary[recipe] = {}
        for run_dir in sorted(args.runs.glob(f"{recipe}_*gpu_fsdp_*")):
            rows = load(run_dir)
            if not rows:
                continue
            label = run_dir.name.replace(f"{recipe}_", "").replace("_", " ")
            ax.plot([r["tokens"] / 1e6 for r in rows], [r["loss_avg"] for r in rows],
                    marker="o", ms=3, label=label)
            summary[recipe][run_dir.name] = band_check(seeds, rows)
        ax.set_title(recipe)
        ax.set_xlabel("training tokens (M)")
        ax.set_ylabel("training loss (mean over 5 steps)")
        ax.legend()
    fig.tight_layout()
    args.out.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out / "dist_loss.png", dpi=120)
    for recipe, runs in summary.items():
        for name, r in runs.items():
            print(f"{name:<40} {r['inside_band']}/{r['points']} points inside the seed band, "
                  f"at most {r['max_outside']:.4f} outside")
    print(json.dumps({"plot": str(args.out / "dist_loss.png"), "band": summary}))
    return summary


if __name__ == "__main__":
    main()
