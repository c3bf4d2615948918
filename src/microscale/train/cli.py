"""``microscale`` command line: ``train``, ``compare``, ``plot`` (and ``analyze`` when installed).

    microscale compare                                  # bf16 vs nvfp4, tiny model, CPU, minutes
    microscale compare --recipes bf16,nvfp4,mxfp8 --model small --steps 2000 --out runs/small
    microscale train --recipe nvfp4 --model 125m --steps 20000 --lr-schedule wsd --switch-step decay
    microscale train --recipe nvfp4 --out runs/x --resume   # continue exactly where it stopped
    microscale plot runs/compare                        # redraw loss.png, rel_diff.png, summary

Exit codes: 0 done, 1 an I/O error such as a full disk (one line naming the file; earlier
checkpoints stay intact), 2 bad arguments or inputs (including a missing optional dependency:
the harness needs ``pip install microscale[train]``), 3 the loss diverged (NaN/Inf; the message
names the step and the last good checkpoint).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.util
import logging
import sys
import time
from pathlib import Path

__all__ = ["main", "build_parser", "config_from_args"]

log = logging.getLogger("microscale")

COMPARE_DEFAULTS = {"recipes": "bf16,nvfp4", "model": "tiny", "steps": 300, "out": "runs/compare"}


def _recipe_names() -> list[str]:
    from ..recipe import PRESETS

    return list(PRESETS)


def _model_names() -> list[str]:
    from .model import MODEL_CONFIGS

    return list(MODEL_CONFIGS)


def _add_training_args(p: argparse.ArgumentParser, steps: int, out: str) -> None:
    g = p.add_argument_group("model and data")
    g.add_argument("--model", default="tiny", choices=_model_names(), help="model size (default: tiny)")
    g.add_argument("--mlp", choices=("relu2", "swiglu"), default=None, help="MLP type (default: relu2)")
    g.add_argument("--data", default=None, help="stdlib (default), pysrc (stdlib + installed packages' "
                   "sources, 100M+ bytes), a text file, a uint16 .bin or a dir with train.bin")
    g.add_argument("--max-bytes", type=int, default=None, help="use only the first N bytes of the built-in corpus")
    g.add_argument("--order", choices=("random", "epoch"), default="random",
                   help="random windows (with replacement), or epoch: each token once at most (refuses a 2nd epoch)")
    g.add_argument("--cache-dir", default=None, help="corpus cache (default $MICROSCALE_CACHE or ~/.cache/microscale)")
    g = p.add_argument_group("optimization")
    g.add_argument("--steps", type=int, default=steps, help=f"optimizer steps (default: {steps})")
    g.add_argument("--batch-size", type=int, default=8)
    g.add_argument("--seq-len", type=int, default=128)
    g.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (AdamW, betas 0.9/0.95)")
    g.add_argument("--min-lr-ratio", type=float, default=0.1, help="final LR as a fraction of --lr")
    g.add_argument("--lr-schedule", choices=("cosine", "wsd"), default="cosine",
                   help="cosine, or wsd = warmup-stable-decay (linear decay over --decay-frac)")
    g.add_argument("--warmup", type=int, default=None, help="warmup steps (default: 5%% of --steps)")
    g.add_argument("--decay-frac", type=float, default=0.2, help="WSD: fraction of steps in the decay")
    g.add_argument("--weight-decay", type=float, default=0.1)
    g.add_argument("--grad-clip", type=float, default=1.0, help="clip the grad norm (0 = off)")
    g.add_argument("--grad-accum", type=int, default=1,
                   help="micro-batches per step (the batch split; weights quantized once a step)")
    g.add_argument("--seed", type=int, default=0, help="init + SR stream (+ data order unless --data-seed)")
    g.add_argument("--data-seed", type=int, default=None, help="data order and val set (default: --seed)")
    g = p.add_argument_group("precision")
    g.add_argument("--switch-step", default=None,
                   help="from this step run GEMMs in bf16 (int, or 'decay' = WSD decay start)")
    g.add_argument("--switch-mode", choices=("fprop", "all"), default="fprop")
    g.add_argument("--keep-hp", default=None,
                   help="layers kept in bf16: 'last_fraction:0.15', 'last:2', 'first:1,last:1', "
                        "a module pattern, or 'none' (default: the recipe's own)")
    g.add_argument("--backend", choices=("auto", "reference", "triton"), default=None,
                   help="quantizer/GEMM backend (default: the recipe's, auto)")
    g = p.add_argument_group("run")
    g.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cuda if available)")
    g.add_argument("--compile", choices=("auto", "on", "off"), default="auto",
                   help="torch.compile each block (auto: on for CUDA, off for CPU)")
    g.add_argument("--compile-mode", default="default",
                   choices=("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"),
                   help="torch.compile mode; reduce-overhead asks for CUDA graphs per block "
                        "(fails on GPUs for these models: use --cuda-graph)")
    g.add_argument("--cuda-graph", action="store_true",
                   help="replay forward+backward of each step from one CUDA graph (CUDA; "
                        "also with --dist fsdp, collectives included)")
    g.add_argument("--recompute-input", nargs="?", const="on", default="auto",
                   choices=("auto", "on", "off"),
                   help="MLP down projections keep the activation's sources for backward and "
                        "recompute their quantized input there (less memory, same bits); auto "
                        "(the default): on where that input's wgrad view is FP8 tensorwise, "
                        "blockwise or MXFP8 and the layer is 2048+ wide, and where it is NVFP4")
    g.add_argument("--check-compile", action="store_true",
                   help="at the first step and at a precision switch, compare the compiled "
                        "blocks' gradients with eager's on that batch and stop on a fault "
                        "(zero or missing gradients, blocks' cosine < 0.5)")
    g.add_argument("--threads", type=int, default=None,
                   help="CPU threads (default: 1 for quantized recipes on CPU, where it is faster; else torch's)")
    g.add_argument("--out", default=out, help=f"output directory (default: {out})")
    g.add_argument("--eval-every", type=int, default=50)
    g.add_argument("--eval-batches", type=int, default=8)
    g.add_argument("--log-every", type=int, default=1)
    g.add_argument("--ckpt-every", type=int, default=100, help="0 = only at the end")
    g.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in --out")
    g.add_argument("--monitor-every", type=int, default=0,
                   help="log per-layer quantization SQNR every N steps (needs microscale.analysis)")
    g.add_argument("--no-progress", action="store_true", help="no progress bar (also off when not a TTY)")
    g.add_argument("--stop-after", type=float, default=None, metavar="SECONDS",
                   help="checkpoint and stop after this many seconds of the loop (continue with --resume)")


def config_from_args(args: argparse.Namespace, recipe: str, out: str):
    """A :class:`TrainConfig` from parsed flags."""
    from .trainer import TrainConfig

    switch = args.switch_step
    cfg = TrainConfig(
        recipe=recipe, model=args.model, mlp=args.mlp, steps=args.steps, batch_size=args.batch_size,
        seq_len=args.seq_len, lr=args.lr, min_lr_ratio=args.min_lr_ratio, lr_schedule=args.lr_schedule,
        warmup=args.warmup, decay_frac=args.decay_frac, weight_decay=args.weight_decay,
        grad_clip=args.grad_clip, switch_mode=args.switch_mode, keep_hp=args.keep_hp,
        backend=args.backend, seed=args.seed, data_seed=args.data_seed, order=args.order,
        stop_after_s=args.stop_after, device=args.device, threads=args.threads, data=args.data,
        max_bytes=args.max_bytes, cache_dir=args.cache_dir, out=out, eval_every=args.eval_every,
        eval_batches=args.eval_batches, log_every=args.log_every, ckpt_every=args.ckpt_every,
        resume=args.resume, progress=False if args.no_progress else None, compile=args.compile,
        compile_mode=args.compile_mode, cuda_graph=args.cuda_graph, grad_accum=args.grad_accum,
        check_compile=getattr(args, "check_compile", False),
        recompute_input={"on": True, "off": False}.get(getattr(args, "recompute_input", "auto")),
        dist=getattr(args, "dist", "none"), all_gather=getattr(args, "all_gather", "auto"))
    if switch is not None:
        if str(switch) == "decay":
            cfg.switch_step = cfg.decay_start
        elif str(switch).isdigit():
            cfg.switch_step = int(switch)
        else:
            raise ValueError(f"--switch-step must be a non-negative int or 'decay', got {switch!r}")
    return cfg


def _monitor(args):
    if not args.monitor_every:
        return None
    if importlib.util.find_spec("microscale.analysis.monitor") is None:
        raise ValueError("--monitor-every needs microscale.analysis, which is not installed")
    import torch.nn.functional as F
    from ..analysis.monitor import QuantMonitor

    def lm_loss(logits, batch):
        return F.cross_entropy(logits.flatten(0, 1), batch[1].flatten())

    return QuantMonitor(every=args.monitor_every, inputs=lambda batch: batch[0], loss_fn=lm_loss)


def _check_out(out: str) -> None:
    """``--out`` must be (or become) a directory: no existing file on its path."""
    for part in (Path(out), *Path(out).parents):
        if part.exists() and not part.is_dir():
            raise ValueError(f"--out {out}: {part} is an existing file, not a directory")


def _run_one(args, recipe: str, out: str) -> dict:
    from .trainer import Trainer

    _check_out(out)
    trainer = Trainer(config_from_args(args, recipe, out), monitor=_monitor(args))
    _announce(trainer, recipe, out)
    return trainer.fit()


def _announce(trainer, recipe: str, out: str) -> None:
    if not trainer.is_writer:
        return
    n_conv = len(trainer.report.converted) if trainer.report is not None else 0
    where = f"{trainer.world} processes ({trainer.cfg.dist})" if hasattr(trainer, "world") else \
        f"device {trainer.device}"
    if trainer.bf16_gemm == "fp32":             # train/cpu_gemm.py: this CPU's bf16 GEMMs
        where += (" (bf16 GEMMs as fp32 GEMMs of the bf16 values; torch's own with "
                  "MICROSCALE_CPU_BF16_GEMM=native)")
    print(f"[{recipe}] {trainer.model.num_params():,} params, {n_conv} linears quantized, "
          f"{where}, {trainer.data.describe()} -> {out}", flush=True)


def _run_dist(args) -> tuple[dict, bool]:
    """``--dist ddp|fsdp`` under torchrun: every rank trains, rank 0 reports."""
    import torch.distributed as dist

    from .distributed import DistTrainer, init_process_group
    cfg = config_from_args(args, args.recipe, args.out)
    _check_out(args.out)
    rank, _ = init_process_group(cfg)
    if rank:
        logging.getLogger("microscale").setLevel(logging.WARNING)
    trainer = None
    try:
        trainer = DistTrainer(cfg, monitor=_monitor(args))
        _announce(trainer, args.recipe, args.out)
        return trainer.fit(), trainer.is_writer
    finally:
        # free DDP's reducer while the process group lives: freed later (an exception's
        # traceback keeps the trainer), its group's destructor deadlocks gloo on the GIL
        if trainer is not None:
            trainer.release()
        gc.collect()
        dist.destroy_process_group()


def cmd_train(args) -> int:
    if args.dist != "none":
        record, writer = _run_dist(args)
    else:
        record, writer = _run_one(args, args.recipe, args.out), True
    if writer:
        val = f", val loss {record['val_loss']:.4f}" if "val_loss" in record else ""
        state = "done" if record.get("step", args.steps) >= args.steps else \
            f"stopped early (--stop-after; continue with --resume) after {args.steps} planned " \
            "steps at"
        print(f"{state}: step {record.get('step')}, loss {record.get('loss', float('nan')):.4f}"
              f"{val}; metrics in {Path(args.out) / 'metrics.jsonl'}")
    return 0


def cmd_compare(args) -> int:
    from .plots import plot_runs

    recipes = [r.strip() for r in args.recipes.split(",") if r.strip()]
    known = _recipe_names()
    unknown = [r for r in recipes if r not in known]
    if unknown or len(set(recipes)) != len(recipes) or not recipes:
        raise ValueError(f"--recipes must be distinct presets from {', '.join(known)}; got {args.recipes!r}")
    t0 = time.perf_counter()
    out = Path(args.out)
    for recipe in recipes:   # same seed -> same init and the same batches for every recipe
        _run_one(args, recipe, str(out / recipe))
    written = plot_runs([out / r for r in recipes], out)
    print("\n" + written["table"])
    print(f"\nwrote {out / 'summary.md'}, {written['loss']}, {written['rel_diff'] or '(no rel_diff: no bf16 run)'}"
          f"  [{time.perf_counter() - t0:.0f} s]")
    return 0


def cmd_plot(args) -> int:
    from .plots import plot_runs

    written = plot_runs(args.dirs, args.out)
    print(written["table"])
    print(f"wrote {written['loss']}" + (f", {written['rel_diff']}" if written["rel_diff"] else ""))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = argparse.ArgumentParser(prog="microscale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"microscale {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("train", help="train one model with one recipe")
    p.add_argument("--recipe", default="bf16", choices=_recipe_names())
    _add_training_args(p, steps=COMPARE_DEFAULTS["steps"], out="runs/train")
    g = p.add_argument_group("distributed (launch with torchrun; docs/distributed.md)")
    g.add_argument("--dist", choices=("none", "ddp", "fsdp"), default="none",
                   help="data parallelism over the torchrun processes (--batch-size is global)")
    g.add_argument("--all-gather", choices=("auto", "quantized", "fp32"), default="auto",
                   help="FSDP2 weight all-gather: in the recipe's fprop format, or fp32 "
                        "(auto: quantized where every layer allows it; logged)")
    p.set_defaults(func=cmd_train)
    p = sub.add_parser("compare", help="train several recipes from the same seed and data; plot and tabulate")
    p.add_argument("--recipes", default=COMPARE_DEFAULTS["recipes"],
                   help=f"comma-separated presets (default: {COMPARE_DEFAULTS['recipes']})")
    _add_training_args(p, steps=COMPARE_DEFAULTS["steps"], out=COMPARE_DEFAULTS["out"])
    p.set_defaults(func=cmd_compare)
    p = sub.add_parser("plot", help="redraw loss.png, rel_diff.png and summary.md from run directories")
    p.add_argument("dirs", nargs="+", help="compare directories or run directories")
    p.add_argument("--out", default=None, help="where to write (default: the compare dir / the runs' parent)")
    p.set_defaults(func=cmd_plot)
    if importlib.util.find_spec("microscale.analysis") and importlib.util.find_spec("microscale.analysis.cli"):
        try:
            importlib.import_module("microscale.analysis.cli").register(sub)
        except (ImportError, AttributeError, SyntaxError) as err:   # keep train/compare usable
            log.warning("microscale analyze is unavailable: %s", err)
    return parser


# optional dependency -> the extra that installs it
_EXTRAS = {"safetensors": "train", "matplotlib": "train", "tqdm": "train", "triton": "kernels"}


def _missing(err: ModuleNotFoundError) -> str:
    top = (err.name or "").split(".")[0] or str(err)
    extra = _EXTRAS.get(top)
    hint = f"pip install 'microscale[{extra}]'" if extra else f"pip install {top}"
    return f"this command needs {top}, which is not installed: {hint}"


def _fail(message: str, code: int) -> int:
    print(f"microscale: error: {message}", file=sys.stderr)
    return code


class _CurrentStderr(logging.StreamHandler):
    """A log handler writing to whatever ``sys.stderr`` is when a record is emitted, not the
    stream of the moment it was installed (which a caller, e.g. a test runner, may close)."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s", handlers=[_CurrentStderr()])
    args = build_parser().parse_args(argv)
    try:
        from .trainer import DivergenceError
    except ModuleNotFoundError as err:              # a base install without microscale[train]
        return _fail(_missing(err), 2)
    try:
        return int(args.func(args) or 0)
    except DivergenceError as err:
        return _fail(str(err), 3)
    except ModuleNotFoundError as err:
        return _fail(_missing(err), 2)
    except (ValueError, FileNotFoundError) as err:
        return _fail(str(err), 2)
    except OSError as err:                          # e.g. a full disk; names the file
        message = err.strerror or str(err)
        return _fail(message + (f" ({err.filename})" if err.filename else ""), 1)


if __name__ == "__main__":
    sys.exit(main())
