"""Plots and summary tables for runs: loss curves and the paper's relative loss difference.

Inputs are run directories (each with ``metrics.jsonl`` and ``config.json``). For a
comparison the baseline is the ``bf16`` run and every other recipe is drawn as

    rel_diff(t) = (loss_recipe(t) - loss_bf16(t)) / loss_bf16(t)

over tokens t, at the steps both runs logged (same seed, same batches, so per-step losses
pair up and most batch-to-batch noise cancels). Train curves show the raw per-step ratio
faintly and an EMA of it (``alpha``) on top; validation curves (every ``--eval-every`` steps)
are drawn with markers. Figures are PNG via matplotlib's Agg backend (no display needed).

Summary numbers: "train loss" is the mean logged loss over the last 5% of steps (one step's
loss is noisy), "val loss" the last evaluation, the gaps are relative to bf16, tokens/s the
median of the logged intervals' throughput (robust to the first step's warm-up and to stalls
caused by other processes; evals and checkpoints are never inside an interval).
"""

from __future__ import annotations

import json
import logging
import math
import statistics
from pathlib import Path

__all__ = ["load_run", "find_runs", "summarize", "format_table", "write_summary",
           "plot_loss", "plot_rel_diff", "plot_runs", "ema"]

log = logging.getLogger(__name__)

BASELINE = "bf16"


def load_run(run_dir: str | Path) -> dict:
    """``{"name", "dir", "config", "records"}`` of one run (name = its recipe, else the dir name)."""
    run_dir = Path(run_dir)
    metrics = run_dir / "metrics.jsonl"
    if not metrics.exists():
        raise FileNotFoundError(f"{run_dir} is not a run directory (no metrics.jsonl)")
    records = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    config_path = run_dir / "config.json"
    config = json.loads(config_path.read_text()) if config_path.exists() else {}
    return {"name": config.get("recipe", run_dir.name), "dir": run_dir, "config": config, "records": records}


def find_runs(paths: list[str | Path]) -> list[dict]:
    """Runs under ``paths``: each path is a run dir or a compare dir holding run dirs."""
    runs = []
    for path in map(Path, paths):
        if (path / "metrics.jsonl").exists():
            runs.append(load_run(path))
        elif path.is_dir():
            runs += [load_run(p) for p in sorted(path.iterdir()) if (p / "metrics.jsonl").exists()]
        else:
            raise FileNotFoundError(f"{path} is neither a run directory nor a directory of runs")
    if not runs:
        raise FileNotFoundError(f"no runs (metrics.jsonl) found under {', '.join(map(str, paths))}")
    names = [r["name"] for r in runs]
    for run in runs:          # two runs of one recipe (e.g. different --keep-hp): tell them apart
        if names.count(run["name"]) > 1 and run["name"] != BASELINE:
            run["name"] = f"{run['name']} ({run['dir'].name})"
    return sorted(runs, key=lambda r: (r["name"] != BASELINE, r["name"]))


def ema(values: list[float], alpha: float = 0.1) -> list[float]:
    """Exponential moving average with bias correction (the first points are not dragged to 0)."""
    out, avg = [], 0.0
    for i, v in enumerate(values, start=1):
        avg = (1 - alpha) * avg + alpha * v
        out.append(avg / (1 - (1 - alpha) ** i))
    return out


def _series(run: dict, key: str) -> tuple[list[int], list[float], list[int]]:
    """(steps, values, tokens) of the records that carry ``key``."""
    rows = [r for r in run["records"] if key in r and r[key] is not None]
    return [r["step"] for r in rows], [float(r[key]) for r in rows], [r["tokens"] for r in rows]


def _rel_diff(run: dict, base: dict, key: str) -> tuple[list[int], list[float]]:
    """Tokens and (loss - loss_base)/loss_base at the steps both runs logged."""
    b_steps, b_vals, _ = _series(base, key)
    base_at = dict(zip(b_steps, b_vals))
    steps, vals, tokens = _series(run, key)
    pairs = [(t, (v - base_at[s]) / base_at[s]) for s, v, t in zip(steps, vals, tokens)
             if s in base_at and base_at[s] != 0]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _figure(ncols: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, figsize=(6.2 * ncols, 4.2), squeeze=False)
    return plt, fig, axes[0]


def _save(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)
    return path


def plot_loss(runs: list[dict], path: str | Path, alpha: float = 0.1) -> Path:
    """Train (EMA over raw) and validation loss vs tokens, one colour per recipe."""
    plt, fig, (ax_train, ax_val) = _figure(2)
    for i, run in enumerate(runs):
        color = f"C{i}"
        _, loss, tokens = _series(run, "loss")
        ax_train.plot(tokens, loss, color=color, alpha=0.2, linewidth=0.8)
        ax_train.plot(tokens, ema(loss, alpha), color=color, label=run["name"])
        _, val, vtok = _series(run, "val_loss")
        ax_val.plot(vtok, val, color=color, marker="o", markersize=3, label=run["name"])
    for ax, title in ((ax_train, f"train loss (EMA α={alpha}, raw faint)"), (ax_val, "validation loss")):
        ax.set(xlabel="tokens", ylabel="loss", title=title)
        ax.grid(alpha=0.3)
        ax.legend()
    return _save(plt, fig, Path(path))


def plot_rel_diff(runs: list[dict], path: str | Path, alpha: float = 0.1) -> Path | None:
    """(loss - loss_bf16) / loss_bf16 vs tokens for every non-baseline run; None without a bf16 run."""
    base = next((r for r in runs if r["name"] == BASELINE), None)
    others = [r for r in runs if r is not base]
    if base is None or not others:
        log.warning("rel_diff plot needs a %r run and at least one other; skipped", BASELINE)
        return None
    plt, fig, (ax_train, ax_val) = _figure(2)
    for i, run in enumerate(others, start=1):
        color = f"C{i}"
        tokens, diff = _rel_diff(run, base, "loss")
        ax_train.plot(tokens, [100 * d for d in diff], color=color, alpha=0.2, linewidth=0.8)
        ax_train.plot(tokens, [100 * d for d in ema(diff, alpha)], color=color, label=run["name"])
        vtok, vdiff = _rel_diff(run, base, "val_loss")
        ax_val.plot(vtok, [100 * d for d in vdiff], color=color, marker="o", markersize=3, label=run["name"])
    for ax, title in ((ax_train, "train: (loss − loss_bf16) / loss_bf16"), (ax_val, "validation: same")):
        ax.axhline(0.0, color="k", linewidth=0.8)
        ax.set(xlabel="tokens", ylabel="relative difference (%)", title=title)
        ax.grid(alpha=0.3)
        ax.legend()
    return _save(plt, fig, Path(path))


def summarize(runs: list[dict]) -> list[dict]:
    """One row per run: final train/val loss, relative gaps to bf16, tokens/s, steps."""
    rows = []
    for run in runs:
        steps, loss, _ = _series(run, "loss")
        _, val, _ = _series(run, "val_loss")
        last = run["records"][-1] if run["records"] else {}
        tail = [v for s, v in zip(steps, loss) if s >= 0.95 * steps[-1]] if steps else []
        _, speed, _ = _series(run, "tok_per_s")
        rows.append({"recipe": run["name"], "steps": last.get("step"), "tokens": last.get("tokens"),
                     "train_loss": sum(tail) / len(tail) if tail else None,
                     "val_loss": val[-1] if val else None,
                     "tok_per_s": statistics.median(speed) if speed else None,
                     "train_time_s": last.get("time_s"), "params": run["config"].get("params")})
    base = next((r for r in rows if r["recipe"] == BASELINE), None)
    for row in rows:
        for key in ("train", "val"):
            b, v = (base or {}).get(f"{key}_loss"), row[f"{key}_loss"]
            row[f"{key}_gap"] = (v - b) / b if b and v is not None else None
    return rows


def format_table(rows: list[dict]) -> str:
    """Markdown table of :func:`summarize` rows."""
    def num(v, fmt):
        return "—" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, fmt)

    lines = ["| recipe | steps | tokens | train loss | val loss | train gap vs bf16 | val gap vs bf16 | tokens/s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['recipe']} | {num(r['steps'], 'd')} | {num(r['tokens'], ',')} | "
                     f"{num(r['train_loss'], '.4f')} | {num(r['val_loss'], '.4f')} | "
                     f"{num(r['train_gap'], '+.2%')} | {num(r['val_gap'], '+.2%')} | {num(r['tok_per_s'], ',.0f')} |")
    return "\n".join(lines)


def write_summary(runs: list[dict], out_dir: str | Path, header: str = "") -> str:
    """Write ``summary.md`` and ``summary.json`` into ``out_dir``; returns the table."""
    from .checkpoint import atomic_write_text

    out_dir = Path(out_dir)
    rows = summarize(runs)
    table = format_table(rows)
    cfg = runs[0]["config"]
    setup = (f"model `{cfg.get('model')}` ({cfg.get('params', 0):,} params), {cfg.get('steps')} steps × "
             f"{cfg.get('batch_size')} × {cfg.get('seq_len')} tokens, data `{cfg.get('data') or 'stdlib'}`, "
             f"seed {cfg.get('seed')}, device {cfg.get('device_resolved')}") if cfg else ""
    note = ("train loss: mean over the last 5% of steps; val loss: last evaluation; "
            "gap = (loss − loss_bf16) / loss_bf16; tokens/s: median over logged intervals.")
    text = "\n\n".join(p for p in (header or "# microscale compare", setup, table, note) if p) + "\n"
    atomic_write_text(out_dir / "summary.md", text)
    atomic_write_text(out_dir / "summary.json", json.dumps({"runs": rows, "config": cfg}, indent=2, default=str))
    return table


def plot_runs(paths: list[str | Path], out_dir: str | Path | None = None) -> dict:
    """Redraw ``loss.png`` / ``rel_diff.png`` and the summary for the runs under ``paths``."""
    runs = find_runs(paths)
    if out_dir is None:
        first = Path(paths[0])
        out_dir = first.parent if (first / "metrics.jsonl").exists() else first
    out_dir = Path(out_dir)
    written = {"loss": plot_loss(runs, out_dir / "loss.png"),
               "rel_diff": plot_rel_diff(runs, out_dir / "rel_diff.png")}
    written["table"] = write_summary(runs, out_dir)
    return written
