"""Gradient fidelity of every variant of the queue on snapshots of the bf16 run (issue 14, item 3).

    python benchmarks/paper/fidelity.py --snapshots /root/paper/bf16_s0/snapshots --out DIR
    python benchmarks/paper/fidelity.py --snapshots runs/my_bf16_run/checkpoints --out DIR
    python benchmarks/paper/fidelity.py --setting smoke --train-first --out /tmp/fid   # CPU demo

For each snapshot (weights of bf16_s0 at 10%, 40%, the decay start and the end of training) and
each variant (the queue's recipes with their keep-hp and switch flags, plus ``bf16``, which
repeats the reference and gives the measurement's floor), :func:`microscale.analysis.fidelity.
grad_fidelity` compares every linear layer's dW with the bf16 dW on the same fixed batches (the
first ``--batches`` validation batches of the corpus, the same for every variant and snapshot),
over ``--draws`` stochastic-rounding draws. Writes ``DIR/fidelity.json`` (rows + what was
measured, on what), ``DIR/fidelity.csv`` and ``DIR/fidelity.png``. The newest snapshot is
measured first, and the files are rewritten after each snapshot, so a job stopped by its deadline
still leaves complete results for the snapshots it did.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2] / "src")]  # this checkout
import spec

FIELDS = ("variant", "recipe", "step", "layer", "index", "cos", "rel_err", "bias_rel", "bias_proj",
          "bias_floor", "samples", "isolated_rel_err")


def variants(setting: spec.Setting) -> list:
    """One fidelity variant per distinct configuration of the queue (seeds collapse), bf16 first."""
    from microscale.analysis.fidelity import Variant

    out, seen = [Variant("bf16")], {"bf16"}
    for run in spec.RUNS:
        name = run.name.rsplit("_s", 1)[0] if run.name.rsplit("_s", 1)[-1].isdigit() else run.name
        if name in seen:
            continue
        seen.add(name)
        out.append(Variant(name, run.recipe, run.keep_hp, setting.decay_start if run.switch else None,
                           run.switch_mode))
    return out


def _batches(setting: spec.Setting, cache_dir, count: int, batch_size: int, device):
    from microscale.train.data import BatchSampler, load_data

    data = load_data(setting.data, str(cache_dir) if cache_dir else None, setting.max_bytes)
    sampler = BatchSampler(data, batch_size, setting.seq_len, setting.data_seed, setting.order)
    return data, [(x.to(device), y.to(device)) for x, y in sampler.val_batches(count)]


def write_outputs(rows: list[dict], meta: dict, out: Path) -> None:
    from microscale.train.checkpoint import atomic_write_text

    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "fidelity.json", json.dumps({"meta": meta, "rows": rows}, indent=1))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=FIELDS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(out / "fidelity.csv", buf.getvalue())
    plot_fidelity(rows, out / "fidelity.png")


def run_on_snapshots(setting: spec.Setting, snapshots: list[Path], out: Path, *, cache_dir=None,
                     device=None, batches: int = 4, batch_size: int = 8, draws: int = 4,
                     deadline: float | None = None, resume: bool = True) -> list[dict]:
    """Fidelity rows for every snapshot (newest first) and variant; files rewritten per snapshot."""
    import torch

    from microscale.analysis.fidelity import grad_fidelity
    from microscale.train.model import build_model

    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    data, fixed = _batches(setting, cache_dir, batches, batch_size, dev)
    make = lambda: build_model(setting.model, data.vocab_size, max_seq_len=setting.seq_len).to(dev)
    rows, done, t0, earlier_wall = [], [], time.time(), 0.0
    if resume and (out / "fidelity.json").exists():        # continue a job cut short by its deadline
        earlier = json.loads((out / "fidelity.json").read_text())
        rows, done = earlier["rows"], earlier["meta"]["snapshots"]
        earlier_wall = earlier["meta"].get("wall_s", 0.0)
    meta = {"setting": dataclasses.asdict(setting), "batches": batches,
            "batch_size": batch_size, "seq_len": setting.seq_len, "draws": draws, "device": str(dev),
            "torch": torch.__version__, "corpus": data.describe(), "snapshots": done}
    measured_here = 0
    for snap in sorted(snapshots, reverse=True):
        if snap.name in done:
            continue
        if deadline is not None and measured_here and \
                time.time() + (time.time() - t0) / measured_here > deadline:
            break                                          # the next snapshot would not finish
        step = int(snap.stem.split("_")[-1])
        state = _load_state(snap, make, dev)
        rows += grad_fidelity(make, state, fixed, variants(setting), draws=draws, step=step)
        done.append(snap.name)
        measured_here += 1
        meta["wall_s"] = round(earlier_wall + time.time() - t0, 1)
        write_outputs(rows, meta, out)
    return rows


def find_snapshots(directory: Path) -> list[Path]:
    """Weight snapshots (``step_*.safetensors``) or, in a harness checkpoints dir, its ``step_*.json``."""
    checkpoints = sorted(Path(directory).glob("step_*.json"))
    return checkpoints or sorted(Path(directory).glob("step_*.safetensors"))


def _load_state(path: Path, make, device) -> dict:
    """A snapshot's tensors, or the model state of a harness checkpoint (its JSON)."""
    if path.suffix == ".json":
        from microscale.train.checkpoint import load_checkpoint

        model = make()
        load_checkpoint(path, model, None, restore_rng=False)
        return model.state_dict()
    from safetensors.torch import load_file

    return {k: v.to(device) for k, v in load_file(str(path)).items()}


def plot_fidelity(rows: list[dict], path: Path) -> None:
    """Four panels: cos, rel_err and bias (ALL) against the snapshot step; rel_err by depth."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    agg = [r for r in rows if r["layer"] == "ALL"]
    names = list(dict.fromkeys(r["variant"] for r in agg))
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    for ax, key, title in ((axes[0, 0], "cos", "cosine(dW_q, dW_bf16), all layers"),
                           (axes[0, 1], "rel_err", "|dW_q - dW_bf16| / |dW_bf16|, all layers"),
                           (axes[1, 0], "bias_rel", "bias |mean error| / |mean dW| (dashed: noise floor)")):
        for i, name in enumerate(names):
            pts = sorted((r["step"], r[key], r["bias_floor"]) for r in agg if r["variant"] == name)
            color = plt.cm.tab20(i % 20)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=color, label=name)
            if key == "bias_rel":
                ax.plot([p[0] for p in pts], [p[2] for p in pts], ":", color=color)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("snapshot step of bf16_s0")
    axes[0, 1].set_yscale("log")
    axes[1, 0].set_yscale("log")
    last = max(r["step"] for r in agg) if agg else 0
    for i, name in enumerate(names):
        pts = sorted((r["index"], r["rel_err"]) for r in rows
                     if r["variant"] == name and r["step"] == last and r["index"] >= 0)
        axes[1, 1].plot([p[0] for p in pts], [p[1] for p in pts], ".-", color=plt.cm.tab20(i % 20), label=name)
    axes[1, 1].set_title(f"per-layer rel. error at step {last} (layer index, depth order)", fontsize=10)
    axes[1, 1].set_yscale("log")
    axes[0, 0].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _train_first(setting: spec.Setting, work: Path) -> list[Path]:
    """CPU demo: train bf16_s0 of ``setting`` with snapshots, return the snapshot paths."""
    import driver

    job = spec.find("bf16_s0")
    driver.run_train_job(job, setting, work, time.time() + 3600, 0.0, "cpu")
    return sorted((work / job.name / "snapshots").glob("step_*.safetensors"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--snapshots", default=None,
                   help="dir of step_*.safetensors (bf16_s0's snapshots) or a harness run's checkpoints/ dir")
    p.add_argument("--setting", default="paper", help="paper, check or smoke (driver.SETTINGS)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a Setting field")
    p.add_argument("--train-first", action="store_true", help="train bf16_s0 of the setting first (CPU demo)")
    p.add_argument("--out", required=True)
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--device", default=None)
    p.add_argument("--batches", type=int, default=None, help="default: the setting's fidelity_batches")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--draws", type=int, default=None)
    args = p.parse_args(argv)
    import driver

    setting, out = driver.resolve_setting(args), Path(args.out)
    cache = args.cache_dir or (str(out / "work" / "cache") if args.train_first else None)
    snaps = _train_first(setting, out / "work") if args.train_first else find_snapshots(Path(args.snapshots))
    if not snaps:
        raise SystemExit(f"no snapshots found (--snapshots {args.snapshots})")
    run_on_snapshots(setting, snaps, out, cache_dir=cache, device=args.device,
                     batches=args.batches or setting.fidelity_batches,
                     batch_size=args.batch_size or setting.fidelity_batch_size,
                     draws=args.draws or setting.fidelity_draws)
    print(f"wrote {out / 'fidelity.json'}, {out / 'fidelity.csv'}, {out / 'fidelity.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
