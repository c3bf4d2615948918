"""Generate the results page of the paper reproduction from the runs' logs (issue 14, item 4).

    python benchmarks/paper/page.py --runs docs/results/paper_reproduction/runs \\
        --out docs/results/paper_reproduction

Reads what the driver wrote (``runs/<job>/{metrics.jsonl,config.json,status.json}``,
``runs/corpus/summary.json``, ``runs/fidelity/fidelity.json``) and writes into ``--out``:

    README.md      the page: setting, corpus, the final-loss table with the seed band, the five
                   claims with their verdicts (rules in claims.py), the gradient-fidelity table,
                   device, versions, dates, wall time, the exact commands, what is missing
    loss.png       validation and smoothed training loss against tokens (seeds thin, mean bold)
    rel_gap.png    (loss − loss_bf16) / loss_bf16 against tokens, the paper's plot, with the
                   bf16 seed band shaded
    results.json   the table, sigma and the verdicts, machine-readable
    fidelity.png   copied from runs/fidelity when present

Everything on the page is computed from those files; nothing is typed in by hand. Runs that have
not finished are listed as pending and left out of every number.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2] / "src")]  # this checkout
import claims
import spec
from records import load_status, read_metrics

__all__ = ["load_results", "variant_of", "write_page"]

ORDER = ["bf16", "nvfp4", "nvfp4_no_sr", "nvfp4_no_rht", "nvfp4_no_2d", "nvfp4_base", "nvfp4_all_blocks",
         "nvfp4_base_all_blocks",
         "nvfp4_bf16_decay", "mxfp4", "mxfp8", "fp8_blockwise"]


def variant_of(job: str) -> str:
    head, _, tail = job.rpartition("_s")
    return head if head and tail.isdigit() else job


def load_results(runs_dir: Path) -> dict:
    """Every job's status/config/records, the corpus summary and the fidelity rows (if present)."""
    runs = {}
    for job in spec.RUNS:
        status = load_status(runs_dir / job.name)
        if status is None:
            continue
        config_path = runs_dir / job.name / "config.json"
        runs[job.name] = {"status": status, "records": read_metrics(runs_dir / job.name),
                          "config": json.loads(config_path.read_text()) if config_path.exists() else {}}
    corpus = runs_dir / "corpus" / "summary.json"
    fid = runs_dir / "fidelity" / "fidelity.json"
    return {"runs": runs, "corpus": json.loads(corpus.read_text()) if corpus.exists() else None,
            "fidelity": json.loads(fid.read_text()) if fid.exists() else None}


def final_val(run: dict) -> float:
    if run["status"].get("diverged"):
        return math.inf
    vals = [r["val_loss"] for r in run["records"] if "val_loss" in r]
    return vals[-1] if vals else math.nan


def groups(results: dict) -> dict[str, claims.Group]:
    out: dict[str, list[float]] = {}
    for name, run in results["runs"].items():
        if run["status"].get("done"):
            out.setdefault(variant_of(name), []).append(final_val(run))
    return {k: claims.Group(k, tuple(v)) for k, v in out.items() if not any(math.isnan(x) for x in v)}


def table(results: dict, sigma: float | None) -> list[dict]:
    """One row per finished variant: seeds, mean ± spread, gap to bf16, z, throughput, wall time."""
    gs = groups(results)
    rows = []
    for name in [n for n in ORDER if n in gs]:
        g = gs[name]
        runs = [r for j, r in results["runs"].items() if variant_of(j) == name and r["status"].get("done")]
        tok_s = {}  # device -> tokens/s of every logged step on it (devices differ in speed: never pooled)
        for r in runs:
            tok_s.setdefault(_device_of(r), []).extend(rec["tok_per_s"] for rec in r["records"] if "tok_per_s" in rec)
        row = {"variant": name, "seeds": g.n, "mean": g.mean, "spread": g.spread if g.n > 1 else None,
               "std": statistics.stdev(g.losses) if g.n > 1 and math.isfinite(g.mean) else None,
               "tok_per_s": {d: statistics.median(v) for d, v in sorted(tok_s.items()) if v},
               "wall_s": sum(r["status"].get("wall_s", 0.0) for r in runs)}
        if "bf16" in gs and name != "bf16" and math.isfinite(g.mean):
            row["gap"] = (g.mean - gs["bf16"].mean) / gs["bf16"].mean
            row["z_vs_bf16"] = claims.compare(g, gs["bf16"], sigma) if sigma else None
        rows.append(row)
    return rows


def _device_of(run: dict) -> str:
    """Short name of the GPU a run's pieces ran on ('H200'), or 'mixed' when its pieces span two kinds."""
    names = {str(p.get("device", "?")) for p in run["status"].get("pieces", [])}
    short = {next((w for w in n.split() if w[:1] in "HABL" and w[1:2].isdigit()), n) for n in names}
    return short.pop() if len(short) == 1 else "mixed"


def _tok_md(by_device: dict) -> str:
    return " / ".join(f"{v:,.0f} ({d})" for d, v in by_device.items()) or "–"


def _fmt(x, spec_: str = ".4f") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return "diverged" if isinstance(x, float) and math.isinf(x) else format(x, spec_)


def table_md(rows: list[dict]) -> str:
    lines = [("| variant | seeds | final val loss (mean ± seed std) | seed spread (max − min) | gap vs bf16 | z vs bf16 | "
             "tokens/s (median, per GPU) | wall s |"), "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        gap = f"{r['gap']:+.2%}" if "gap" in r else ("0" if r["variant"] == "bf16" else "–")
        mean = _fmt(r["mean"]) + (f" ± {r['std']:.4f}" if r["std"] is not None else "")
        lines.append(f"| {r['variant']} | {r['seeds']} | {mean} | {_fmt(r['spread'])} | {gap} | "
                     f"{_fmt(r.get('z_vs_bf16'), '+.1f')} | {_tok_md(r['tok_per_s'])} | {r['wall_s']:.0f} |")
    return "\n".join(lines)


def fidelity_md(fid: dict | None, variants: list[str] = ()) -> str:
    if not fid or not fid.get("rows"):
        return "Not run yet (the `fidelity` job of the queue)."
    rows = fid["rows"]
    missing = [v for v in variants if v not in {r["variant"] for r in rows}]
    last = max(r["step"] for r in rows)
    lines = [(f"Snapshot of bf16_s0 at step {last} (all snapshots: {sorted({r['step'] for r in rows})}; "
             f"{fid['meta'].get('batches')} batches x {fid['meta'].get('batch_size')} x {fid['meta'].get('seq_len')} "
             f"tokens, {fid['meta'].get('draws')} SR draws; device {fid['meta'].get('device')}). `ALL` = every "
             "linear layer's dW as one vector; `isolated` = `ms.analyze`'s wgrad-GEMM-only error (mean over the "
             "quantized layers)."), "",
             ("| variant | cos (ALL) | rel. error (ALL) | bias (ALL) | noise floor | bias along dW | "
             "rel. error (mean of layers) | isolated wgrad error |"), "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in [r for r in rows if r["step"] == last and r["layer"] == "ALL"]:
        mean = next(m for m in rows if m["step"] == last and m["layer"] == "MEAN" and m["variant"] == r["variant"])
        lines.append(f"| {r['variant']} | {r['cos']:.5f} | {r['rel_err']:.4f} | {r['bias_rel']:.4f} | "
                     f"{r['bias_floor']:.4f} | {r['bias_proj']:+.4f} | {mean['rel_err']:.4f} | "
                     f"{_fmt(mean['isolated_rel_err'])} |")
    if missing:
        lines += ["", (f"No row for {', '.join(missing)}: the fidelity job ran before that variant was "
                       "queued, and running it again needs bf16_s0's weight snapshots, which live only on "
                       "the device's disk (`ONLY=bf16_s0,fidelity REDO=bf16_s0 bash benchmarks/paper/run_paper.sh`).")]
    return "\n".join(lines)


_EVIDENCE = {2: ["nvfp4", "nvfp4_no_sr", "nvfp4_no_rht", "nvfp4_no_2d", "nvfp4_base", "nvfp4_all_blocks",
                "nvfp4_base_all_blocks"],
             3: ["nvfp4", "mxfp4"], 4: ["nvfp4", "nvfp4_bf16_decay"], 5: ["nvfp4", "mxfp4", "mxfp8", "fp8_blockwise"]}


def fidelity_evidence(fid: dict | None, claim: int) -> str:
    """The gradient-fidelity numbers behind a claim (ALL rows of the last snapshot), or ''."""
    if not fid or not fid.get("rows") or claim not in _EVIDENCE:
        return ""
    last = max(r["step"] for r in fid["rows"])
    rows = {r["variant"]: r for r in fid["rows"] if r["step"] == last and r["layer"] == "ALL"}
    parts = [f"{n} {rows[n]['rel_err']:.3f} (bias {rows[n]['bias_rel']:.3f} vs floor {rows[n]['bias_floor']:.3f})"
             for n in _EVIDENCE[claim] if n in rows]
    return f" Gradient fidelity at step {last}, dW rel. error of all layers: " + "; ".join(parts) + "." if parts else ""


# --------------------------------------------------------------------------- plots
def _curves(run: dict, key: str) -> tuple[list[float], list[float]]:
    pts = [(r["tokens"], r[key]) for r in run["records"] if key in r and math.isfinite(r[key])]
    if key == "loss_avg" and pts:
        from microscale.train.plots import ema
        return [p[0] for p in pts], ema([p[1] for p in pts], 0.1)
    return [p[0] for p in pts], [p[1] for p in pts]


def _group_mean(runs: list[dict], key: str) -> dict[int, float]:
    """Mean over a variant's runs at the token counts they all logged."""
    per = [dict(zip(*_curves(r, key))) for r in runs]
    common = set(per[0]).intersection(*per[1:]) if per else set()
    return {t: sum(p[t] for p in per) / len(per) for t in sorted(common)}


def plot_page(results: dict, out: Path) -> list[str]:
    """loss.png and rel_gap.png (see the module docstring); returns the file names written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_variant: dict[str, list[dict]] = {}
    for name, run in results["runs"].items():
        if run["records"]:
            by_variant.setdefault(variant_of(name), []).append(run)
    if not by_variant:
        return []
    colors = {v: plt.cm.tab20(i % 20) for i, v in enumerate(ORDER)}      # 11 variants: C0..C9 would repeat
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, key, title in ((axes[0], "val_loss", "validation loss"), (axes[1], "loss_avg", "training loss (EMA)")):
        _loss_panel(ax, by_variant, key, colors)
        ax.set(title=f"{title} (zoomed on the last 80%)", xlabel="tokens", ylabel="loss")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "loss.png", dpi=110)
    plt.close(fig)
    if "bf16" not in by_variant:
        return ["loss.png"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, key, title in ((axes[0], "loss_avg", "training loss (EMA)"), (axes[1], "val_loss", "validation loss")):
        _rel_gap_panel(ax, by_variant, key, colors)
        ax.set(title=f"(loss − loss_bf16) / loss_bf16, {title}", xlabel="tokens")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "rel_gap.png", dpi=110)
    plt.close(fig)
    return ["loss.png", "rel_gap.png"]


def _loss_panel(ax, by_variant: dict, key: str, colors: dict) -> None:
    """Each run thin, each variant's mean bold; y zoomed on the last 80% of training."""
    late = []
    for v, runs in by_variant.items():
        for run in runs:
            ax.plot(*_curves(run, key), color=colors.get(v, "k"), alpha=0.25, lw=0.8)
        mean = _group_mean(runs, key)
        ax.plot(list(mean), list(mean.values()), color=colors.get(v, "k"), lw=1.6, label=f"{v} ({len(runs)})")
        late += list(mean.items())
    if late:
        t_max = max(t for t, _ in late)
        ys = [x for t, x in late if t >= 0.2 * t_max and math.isfinite(x)]
        if ys and max(ys) > min(ys):
            pad = 0.05 * (max(ys) - min(ys))
            ax.set_ylim(min(ys) - pad, max(ys) + pad)


def _rel_gap_panel(ax, by_variant: dict, key: str, colors: dict) -> None:
    base = _group_mean(by_variant["bf16"], key)
    seeds = [dict(zip(*_curves(r, key))) for r in by_variant["bf16"]]
    ts = [t for t in base if all(t in s for s in seeds) and base[t] > 0]
    if len(seeds) > 1 and ts:
        lo = [min(s[t] for s in seeds) / base[t] - 1 for t in ts]
        hi = [max(s[t] for s in seeds) / base[t] - 1 for t in ts]
        ax.fill_between(ts, lo, hi, color="grey", alpha=0.3, label="bf16 seed band")
    for v, runs in by_variant.items():
        if v == "bf16":
            continue
        mean = _group_mean(runs, key)
        pts = [(t, mean[t] / base[t] - 1) for t in mean if t in base and base[t] > 0]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colors.get(v, "k"), lw=1.3, label=v)
    ax.axhline(0.0, color="k", lw=0.6)
    ax.yaxis.set_major_formatter(matplotlib_percent())


def matplotlib_percent():
    from matplotlib.ticker import PercentFormatter
    return PercentFormatter(1.0, decimals=1)


# --------------------------------------------------------------------------- text
_FLAGS = ("model", "steps", "batch_size", "seq_len", "lr", "min_lr_ratio", "lr_schedule", "decay_frac", "warmup",
          "data", "max_bytes", "order", "seed", "data_seed", "keep_hp", "switch_step", "switch_mode",
          "eval_every", "eval_batches", "log_every", "ckpt_every", "compile")


def harness_command(config: dict) -> str:
    """The ``microscale train`` command equivalent to a run's config.json (driver runs resume in pieces)."""
    parts = [f"microscale train --recipe {config.get('recipe')}"]
    for key in _FLAGS:
        value = config.get(key)
        if value is None or (key == "switch_mode" and config.get("switch_step") is None):
            continue
        parts.append(f"--{key.replace('_', '-')} {value}")
    for flag in ("cuda_graph", "check_compile"):
        if config.get(flag):
            parts.append(f"--{flag.replace('_', '-')}")
    return " ".join(parts) + " --resume"


def environment(results: dict) -> dict:
    pieces = [p for run in results["runs"].values() for p in run["status"].get("pieces", [])]
    pick = lambda key: sorted({str(p.get(key)) for p in pieces})
    dates = sorted(p["started"] for p in pieces if "started" in p)
    return {"devices": pick("device"), "torch": pick("torch"), "triton": pick("triton"), "python": pick("python"),
            "first": dates[0] if dates else None, "last": dates[-1] if dates else None,
            "wall_s": sum(p.get("wall_s", 0.0) for p in pieces), "pieces": len(pieces)}


def _corpus_md(corpus: dict | None, hashes: set) -> str:
    if corpus is None:
        return "No corpus summary in the runs directory."
    text = (f"`{corpus.get('describe')}`; train {corpus.get('train_tokens', 0):,} tokens, validation "
            f"{corpus.get('val_tokens', 0):,} (byte tokens). Roots: "
            + ", ".join(f"`{label}` = `{path}`" for label, path in corpus.get("roots", [])) +
            ". The full file list with sizes and hashes is `runs/corpus/manifest.tsv.gz`.")
    if len(hashes) > 1:
        text += f"\n\n**Warning: the runs used different corpora** (hashes {sorted(hashes)}); they are not comparable."
    return text


def _setting(results: dict) -> spec.Setting:
    """The setting the runs used (from the first config.json), else the spec's."""
    config = next((r["config"] for r in results["runs"].values() if r["config"]), None)
    if config is None:
        return spec.SETTING
    known = {k: config[k] for k in spec.Setting.__dataclass_fields__ if k in config}
    return spec.SETTING.scaled(**known)


def render(results: dict, rows: list[dict], sigma, verdicts, plots: list[str]) -> str:
    env = environment(results)
    done = [n for n, r in results["runs"].items() if r["status"].get("done")]
    pending = [j.name for j in spec.RUNS if j.name not in done]
    hashes = {r["config"].get("data_meta", {}).get("sha256") for r in results["runs"].values()} - {None}
    s = _setting(results)
    lines = ["# Reproducing the NVFP4 paper's findings at 100M tokens", "",
             ("Generated by `python benchmarks/paper/page.py` from the logs in `runs/`; every number below is "
             "computed from them."), "",
             (f"**Setting.** Model `{s.model}`, {s.tokens:,} tokens per run ({s.steps} steps x {s.batch_size} x "
             f"{s.seq_len}), one epoch at most, WSD (warmup {s.warmup}, peak LR {s.lr}, linear decay over the last "
             f"{s.decay_frac:.0%} to {s.min_lr_ratio}x), the same data order and validation batches for every run; "
             "`seed` = init + stochastic rounding."), "",
             f"**Corpus.** {_corpus_md(results['corpus'], hashes)}", "",
             f"**Runs finished:** {len(done)} of {len(spec.RUNS)}." +
             (f" Pending: {', '.join(pending)}." if pending else ""), "",
             "## Final validation loss", "", table_md(rows), "",
             (f"Noise: sigma = {_fmt(sigma)} (pooled std over the seeds of bf16 and nvfp4); z = difference / "
             "(sigma · sqrt(1/n_a + 1/n_b))."), ""]
    lines += [f"![{p}]({p})" for p in plots] + ["", "## The paper's claims", "",
                                               "Rules: `benchmarks/paper/claims.py` (|z| ≥ 2 separates from noise).", ""]
    lines += [f"{v.claim}. **{v.title}: {v.verdict}.** {v.detail.rstrip('.')}." + fidelity_evidence(results["fidelity"], v.claim)
              for v in verdicts]
    lines += ["", "## Gradient fidelity", "", fidelity_md(results["fidelity"], [r["variant"] for r in rows]), ""]
    if results["fidelity"]:
        lines += ["![fidelity](fidelity.png)", ""]
    lines += ["## Provenance", "", (f"Device(s): {', '.join(env['devices']) or '–'}; torch {', '.join(env['torch'])}; "
              f"triton {', '.join(env['triton'])}; Python {', '.join(env['python'])}. Pieces (device calls per run, "
              f"summed): {env['pieces']}, from {env['first']} to {env['last']}; wall time of all pieces "
              f"{env['wall_s'] / 3600:.2f} h."), "", "Queue driver (one device call each):", "",
              "```bash", "timeout 590 env BUDGET_S=555 CKPT=/root/paper bash benchmarks/paper/run_paper.sh", "```", "",
              "Each run, as one harness command (the driver runs it in resumed pieces):", "", "```bash"]
    lines += [harness_command(results["runs"][n]["config"]) + f" --out runs/{n}" for n in done
              if results["runs"][n]["config"]]
    lines += ["```", ""]
    return "\n".join(lines)


def write_page(runs_dir: Path, out: Path) -> dict:
    """Write README.md, results.json and the plots into ``out``; returns results.json's content."""
    out.mkdir(parents=True, exist_ok=True)
    results = load_results(Path(runs_dir))
    sigma, verdicts = claims.judge_all(groups(results))
    rows = table(results, sigma)
    plots = plot_page(results, out)
    fid_png = Path(runs_dir) / "fidelity" / "fidelity.png"
    if fid_png.exists() and fid_png.resolve() != (out / "fidelity.png").resolve():
        shutil.copyfile(fid_png, out / "fidelity.png")
    summary = {"sigma": sigma, "table": rows, "verdicts": [vars(v) for v in verdicts],
               "environment": environment(results)}
    from microscale.train.checkpoint import atomic_write_text
    atomic_write_text(out / "results.json", json.dumps(summary, indent=1, default=str))
    atomic_write_text(out / "README.md", render(results, rows, sigma, verdicts, plots))
    return summary


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", default="docs/results/paper_reproduction/runs")
    p.add_argument("--out", default="docs/results/paper_reproduction")
    args = p.parse_args(argv)
    summary = write_page(Path(args.runs), Path(args.out))
    for v in summary["verdicts"]:
        print(f"claim {v['claim']}: {v['verdict']}")
    print(f"wrote {Path(args.out) / 'README.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
