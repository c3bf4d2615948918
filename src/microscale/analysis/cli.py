"""``microscale analyze``: per-layer quantization diagnostics of a harness model.

    microscale analyze --model tiny --recipe nvfp4 --out runs/analysis
    microscale analyze --checkpoint runs/train --recipe nvfp4 --budget 0.15

Builds the harness model (fresh, or from ``--checkpoint``: a run directory, its
``checkpoints/`` directory or one ``step_*.json``; the model size, MLP, data and, for a quantized
run, the converted layers come from the checkpoint's config), takes one fixed validation batch
of the built-in corpus (or the run's data) and runs :func:`microscale.analyze` with the
next-token cross-entropy as the loss. Writes into ``--out``: ``analysis.json`` (the full
report), ``analysis_heatmap.png``, ``analysis_depth.png`` and ``recommend.json`` (the layers
to keep in high precision for ``--budget``, ready for ``convert(keep_high_precision=...)`` or
``microscale train --keep-hp``), and prints the table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


__all__ = ["register", "run_analyze"]


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``analyze`` subcommand to the harness CLI's subparsers."""
    p = subparsers.add_parser(
        "analyze", help="per-layer quantization error of a recipe (SQNR, flushes, ranking)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--recipe", default=None,
                   help="recipe analyzed on plain nn.Linear layers (default: the checkpoint's, "
                        "else nvfp4)")
    p.add_argument("--model", default="tiny", help="harness model size (ignored with --checkpoint)")
    p.add_argument("--checkpoint", default=None, metavar="DIR",
                   help="run dir, checkpoints dir or step_*.json to load weights from")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--out", default="runs/analysis", metavar="DIR")
    p.add_argument("--budget", type=float, default=0.15,
                   help="fraction of layers (or blocks with --by block) to recommend keeping in bf16")
    p.add_argument("--by", choices=("layer", "block"), default="layer")
    p.add_argument("--metric", default="sensitivity", help="ranking metric, e.g. wgrad.dw/rel_err")
    p.add_argument("--data", default=None, help="data spec (default: the built-in corpus)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run_analyze, handler=run_analyze)
    return p


def _checkpoint_json(path: str) -> Path:
    from ..train.checkpoint import latest_checkpoint

    p = Path(path)
    if p.is_file():
        return p
    for d in (p / "checkpoints", p):
        found = latest_checkpoint(d) if d.is_dir() else None
        if found is not None:
            return found
    raise FileNotFoundError(f"--checkpoint {path}: no step_*.json checkpoint found there")


def _load_model(args, config: dict):
    """The harness model as the trainer builds it (converted if the run was quantized)."""
    import microscale as ms
    from ..train.checkpoint import load_checkpoint
    from ..train.data import load_data
    from ..train.model import build_model

    data = load_data(config.get("data") or args.data, config.get("cache_dir"), config.get("max_bytes"))
    overrides = {"mlp": config["mlp"]} if config.get("mlp") else {}
    seq_len = max(config.get("seq_len", args.seq_len), args.seq_len, 16)
    model = build_model(config.get("model", args.model), data.vocab_size, max_seq_len=seq_len,
                        **overrides)
    if args.checkpoint:
        if config.get("recipe", "bf16") != "bf16":      # rebuild the run's converted layers
            from ..train.trainer import keep_hp_arg
            keep = keep_hp_arg(config.get("keep_hp"))
            ms.convert(model, config["recipe"], **({} if keep is None else {"keep_high_precision": keep}))
        load_checkpoint(_checkpoint_json(args.checkpoint), model, restore_rng=False)
    return model, data


def run_analyze(args) -> int:
    """Handler of ``microscale analyze`` (returns the exit status)."""
    import torch

    from ..train.data import BatchSampler
    from .analyze import analyze
    from .monitor import lm_loss
    from .plots import plot_report

    config: dict = {}
    if args.checkpoint:
        config = json.loads(_checkpoint_json(args.checkpoint).read_text()).get("config", {})
    recipe = args.recipe or (config.get("recipe") if config.get("recipe", "bf16") != "bf16" else "nvfp4")
    torch.manual_seed(args.seed)
    model, data = _load_model(args, config)
    sampler = BatchSampler(data, args.batch_size, args.seq_len, args.seed)
    ids, targets = sampler.val_batches(1)[0]
    model.eval()
    report = analyze(model, (ids,), recipe, lambda logits, _b: lm_loss(logits, (ids, targets)),
                     seed=args.seed)
    report.meta.update({"model": config.get("model", args.model), "checkpoint": args.checkpoint,
                        "batch_size": args.batch_size, "seq_len": args.seq_len})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report.to_json(out / "analysis.json")
    plots = plot_report(report, out)
    keep = report.recommend(args.budget, metric=args.metric, by=args.by)
    (out / "recommend.json").write_text(json.dumps(
        {"budget": args.budget, "metric": args.metric, "by": args.by, "keep_high_precision": keep},
        indent=1) + "\n")
    print(report)
    print(f"\nmost sensitive ({args.metric}): "
          + ", ".join(f"{n} {v:.4g}" for n, v in report.rank(args.metric)[:5]))
    print(f"keep in high precision (budget {args.budget:.0%}, by {args.by}): {keep}")
    print(f"wrote {out / 'analysis.json'}, {out / 'recommend.json'}, " + ", ".join(plots))
    return 0
