"""Run the paper-reproduction queue in time-boxed pieces that resume from checkpoints.

    python benchmarks/paper/driver.py run --budget-s 555 --ckpt-dir /root/paper --out $OUT
    python benchmarks/paper/driver.py estimate          # the queue's device time (markdown)
    python benchmarks/paper/driver.py status --ckpt-dir /root/paper

One ``run`` is one device call. It walks the queue of :mod:`spec` in order and, for each job not
yet done, starts a child process that trains it (``microscale.train.Trainer`` with ``resume``) until
the job ends or the call's budget is nearly spent; then the child writes a checkpoint and stops
(``TrainConfig.stop_after_s``). The next call continues from that checkpoint, which lives on the
device's disk (``--ckpt-dir``): on these lent machines that disk survives between calls only
while the machine stays held, so a job is preferably started only where it fits in what is left
of the call (``--split`` also fills a call's tail with a job that will need another call).

Where things go::

    CKPT/<job>/                 the harness run dir: checkpoints, full metrics.jsonl, snapshots/
    CKPT/results/<job>/         compact copy: metrics.jsonl (every 16th step + evals + last),
                                config.json, status.json (done?, step, pieces with wall time)
    CKPT/results/corpus/        the corpus evidence: summary JSON + manifest.tsv.gz
    CKPT/results/fidelity/      the gradient-fidelity output (see fidelity.py)
    OUT/paper_runs.tgz          CKPT/results packed (one file: the device returns at most 8),
    OUT/driver.log, OUT/queue.md   what this call did, and the queue's state

Unpack ``paper_runs.tgz`` into ``docs/results/paper_reproduction/runs/`` and commit it; a later
call (``--repo-results`` points there) skips every job whose status says done. ``--gpus N`` runs
N jobs at once, one per GPU (``CUDA_VISIBLE_DEVICES``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2] / "src")]  # this checkout
import spec
from records import (
    compact_metrics,
    corpus_evidence,
    load_status,
    piece_record,
    queue_table,
    write_json,
)

log = logging.getLogger("paper")

SETTINGS = {"paper": spec.SETTING,
            # a few minutes on one GPU: compile, CUDA graph, evals, snapshots and fidelity at 125m
            "check": spec.SETTING.scaled(steps=120, warmup=10, eval_every=40, eval_batches=4, ckpt_every=0,
                                         fidelity_batches=1, fidelity_draws=2),
            "smoke": spec.SETTING.scaled(model="micro", steps=12, batch_size=2, seq_len=64, warmup=2,
                                         max_bytes=3_000_000, eval_every=4, eval_batches=2, log_every=1,
                                         ckpt_every=0, compile="off", cuda_graph=False, fidelity_batches=1,
                                         fidelity_batch_size=2, fidelity_draws=2)}


def _parse(field, text: str):
    kind = str(field.type)
    if text.lower() == "none" and "None" in kind:
        return None
    if kind.startswith("bool"):
        if text.lower() not in ("0", "1", "false", "true"):
            raise ValueError(f"--set {field.name}: expected true/false, got {text!r}")
        return text.lower() in ("1", "true")
    return int(text) if kind.startswith("int") else float(text) if kind.startswith("float") else text


def resolve_setting(args) -> spec.Setting:
    """``--setting`` with the ``--set KEY=VALUE`` overrides applied (e.g. ``cuda_graph=false``)."""
    fields = {f.name: f for f in spec.Setting.__dataclass_fields__.values()}
    changes = {}
    for item in getattr(args, "set", None) or []:
        key, _, value = item.partition("=")
        if key not in fields or not _:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE with KEY one of {', '.join(fields)}")
        changes[key] = _parse(fields[key], value)
    return SETTINGS[args.setting].scaled(**changes)


# --------------------------------------------------------------------------- the child: one job
def _snapshot_monitor(steps: tuple[int, ...], directory: Path):
    """A trainer monitor that saves the weights at ``steps`` (for the fidelity job)."""
    from safetensors.torch import save_file

    def monitor(step, model, batch):
        if step in steps:
            directory.mkdir(parents=True, exist_ok=True)
            final = directory / f"step_{step:06d}.safetensors"
            tmp = final.with_suffix(".tmp")
            save_file({k: v.detach().float().cpu().clone() for k, v in model.state_dict().items()
                       if not k.endswith("_extra_state")}, str(tmp))
            os.replace(tmp, final)
    return monitor


def run_train_job(job: spec.RunSpec, setting: spec.Setting, ckpt: Path, deadline: float,
                  save_margin_s: float, device: str | None) -> dict:
    """Train (or continue) ``job`` until done or ``deadline``; returns its status."""
    from microscale.train.checkpoint import latest_checkpoint
    from microscale.train.trainer import DivergenceError, TrainConfig, Trainer

    out = ckpt / job.name
    resumed = latest_checkpoint(out / "checkpoints", quiet=True)
    start_step = int(json.loads(resumed.read_text())["step"]) if resumed else 0
    earlier = load_status(ckpt / "results" / job.name)
    if start_step == 0 and earlier and earlier.get("step", 0) > 0:
        log.warning("%s: its logs reach step %s but no checkpoint is on this disk (a new machine?): "
                    "RESTARTING FROM STEP 0", job.name, earlier["step"])
    cfg = TrainConfig(**job.train_kwargs(setting), out=str(out), resume=True, device=device,
                      cache_dir=str(ckpt / "cache"), progress=False)
    monitor = _snapshot_monitor(job.snapshot_steps(setting), out / "snapshots") if job.snapshots else None
    trainer = Trainer(cfg, monitor=monitor)
    cfg.stop_after_s = max(0.0, deadline - time.time() - save_margin_s)
    t0, outcome = time.time(), "budget"
    try:
        trainer.fit()
        outcome = "done" if trainer.finished else "budget"
    except DivergenceError as err:
        log.error("%s diverged: %s", job.name, err)
        outcome = "diverged"
    piece = piece_record(trainer, start_step, t0, outcome)
    status = export_job(job, out, ckpt / "results", piece, start_step)
    if status["done"]:               # 1.5 GB each at 125m: a finished run's are not kept
        for path in (out / "checkpoints").glob("step_*"):
            path.unlink()
    return status


def export_job(job: spec.RunSpec, out: Path, results: Path, piece: dict, start_step: int) -> dict:
    """Compact copy of a run dir into ``results/<job>/``; the status keeps every piece."""
    dest = results / job.name
    previous = load_status(dest) if start_step > 0 else None
    pieces = (previous or {}).get("pieces", []) + [piece]
    metrics = out / "metrics.jsonl"
    records = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()] \
        if metrics.exists() else []
    compact = compact_metrics(records)
    dest.mkdir(parents=True, exist_ok=True)
    from microscale.train.checkpoint import atomic_write_text
    atomic_write_text(dest / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in compact))
    if (out / "config.json").exists():
        atomic_write_text(dest / "config.json", (out / "config.json").read_text())
    status = {"job": job.name, "recipe": job.recipe, "seed": job.seed, "step": piece["step_to"],
              "steps": piece["steps"], "done": piece["outcome"] in ("done", "diverged"),
              "diverged": piece["outcome"] == "diverged", "pieces": pieces,
              "wall_s": sum(p["wall_s"] for p in pieces)}
    write_json(dest / "status.json", status)
    return status


def run_fidelity_job(setting: spec.Setting, ckpt: Path, device: str | None, deadline: float) -> dict:
    """The gradient-fidelity job on bf16_s0's snapshots (fidelity.py does the work)."""
    import fidelity

    snaps = sorted((ckpt / "bf16_s0" / "snapshots").glob("step_*.safetensors"))
    if not snaps:
        raise FileNotFoundError(f"no snapshots of bf16_s0 under {ckpt / 'bf16_s0' / 'snapshots'}")
    out = ckpt / "results" / "fidelity"
    t0 = time.time()
    fidelity.run_on_snapshots(setting, snaps, out, cache_dir=ckpt / "cache", device=device, deadline=deadline,
                              batches=setting.fidelity_batches, batch_size=setting.fidelity_batch_size,
                              draws=setting.fidelity_draws)
    measured = json.loads((out / "fidelity.json").read_text())["meta"]["snapshots"]
    status = {"job": "fidelity", "done": set(measured) >= {p.name for p in snaps}, "snapshots": measured,
              "of": [p.name for p in snaps], "wall_s": round(time.time() - t0, 1)}
    write_json(out / "status.json", status)
    return status


def cmd_one(args) -> int:
    setting, ckpt = resolve_setting(args), Path(args.ckpt_dir)
    job = spec.find(args.job)
    if job.kind == "fidelity":
        status = run_fidelity_job(setting, ckpt, args.device, args.deadline)
    else:
        status = run_train_job(job, setting, ckpt, args.deadline, args.save_margin_s, args.device)
    log.info("%s: %s", job.name, json.dumps({k: v for k, v in status.items() if k != "pieces"}))
    return 0


# --------------------------------------------------------------------------- the parent: one call
def done_jobs(*roots: Path) -> set[str]:
    """Jobs whose status says done in any of ``roots`` (this lease's results, the repo's)."""
    done = set()
    for root in roots:
        for job in spec.JOBS:
            status = load_status(root / job.name)
            if status and status.get("done"):
                done.add(job.name)
    return done


def _left_s(job: spec.RunSpec, setting: spec.Setting, ckpt: Path) -> float:
    """Estimated seconds to finish ``job`` from its checkpoint (spec's throughput figures)."""
    if job.kind == "fidelity":
        return spec.FIDELITY_S
    status = load_status(ckpt / "results" / job.name) or {}
    step = status.get("step", 0) if (ckpt / job.name / "checkpoints").is_dir() else 0
    full = spec.estimate(job, setting, piece_s=1e9)["total_s"] - spec.STARTUP_S
    return full * (1 - step / setting.steps) + spec.STARTUP_S


def _ready(job: spec.RunSpec, ckpt: Path, running: set[str]) -> bool:
    if job.kind != "fidelity":
        return True
    return "bf16_s0" not in running and (ckpt / "results" / "bf16_s0" / "status.json").exists() and \
        bool(load_status(ckpt / "results" / "bf16_s0")["done"]) and \
        any((ckpt / "bf16_s0" / "snapshots").glob("step_*.safetensors"))


def choose(pending: list[spec.RunSpec], left: float, args, ckpt: Path, running: set[str]):
    """The first ready job that fits in ``left`` seconds, else (``--split``) the first ready one."""
    setting = resolve_setting(args)
    ready = [j for j in pending if _ready(j, ckpt, running)]
    for job in ready:
        if _left_s(job, setting, ckpt) <= left:
            return job
    if args.split and ready and left >= args.min_start_s:
        return ready[0]
    return None


def _launch(job: spec.RunSpec, args, deadline: float, gpu: int | None) -> subprocess.Popen:
    cmd = [sys.executable, str(Path(__file__).resolve()), "one", job.name, "--setting", args.setting,
           "--ckpt-dir", args.ckpt_dir, "--deadline", str(deadline), "--save-margin-s",
           str(args.save_margin_s)] + (["--device", args.device] if args.device else []) + \
        [f"--set={item}" for item in args.set or []]
    env = dict(os.environ)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    log.info("start %s%s (%.0f s left in this call)", job.name, "" if gpu is None else f" on GPU {gpu}",
             deadline - time.time())
    return subprocess.Popen(cmd, env=env)


def schedule(pending: list[spec.RunSpec], args, deadline: float, ckpt: Path) -> dict[str, int]:
    """Run jobs (``--gpus`` at a time) until none fits or the time is spent; their exit codes."""
    slots = list(range(args.gpus)) if args.gpus > 0 else [None]
    running: dict[str, tuple[subprocess.Popen, int | None]] = {}
    codes: dict[str, int] = {}
    while True:
        for name, (proc, slot) in list(running.items()):
            if proc.poll() is not None:
                codes[name] = proc.returncode
                slots.append(slot)
                del running[name]
            elif time.time() > deadline + args.grace_s:       # the child missed its own deadline
                log.error("%s overran the budget: killing it (its last checkpoint stays)", name)
                proc.kill()
        left = deadline - time.time()
        job = choose(pending, left, args, ckpt, set(running)) if slots else None
        if job is not None:
            pending.remove(job)
            slot = slots.pop(0)
            running[job.name] = (_launch(job, args, deadline, slot), slot)
            continue
        if not running:
            return codes
        time.sleep(1.0)


def cmd_run(args) -> int:
    t_start = time.time()
    deadline = t_start + args.budget_s
    ckpt, out = Path(args.ckpt_dir), Path(args.out)
    results = ckpt / "results"
    out.mkdir(parents=True, exist_ok=True)
    setting = resolve_setting(args)
    corpus_evidence(setting, ckpt / "cache", results / "corpus")      # built once, before the children
    done = done_jobs(results, *(Path(p) for p in args.repo_results)) - set((args.redo or "").split(","))
    wanted = [j for j in spec.JOBS if not args.only or j.name in args.only.split(",")]
    pending = [j for j in wanted if j.name not in done]
    log.info("queue: %d jobs, %d done, pending: %s", len(wanted), len(wanted) - len(pending),
             ", ".join(j.name for j in pending) or "none")
    if any(j.kind == "fidelity" for j in pending) and "bf16_s0" not in {j.name for j in pending} and \
            not any((ckpt / "bf16_s0" / "snapshots").glob("step_*.safetensors")):
        log.warning("fidelity needs bf16_s0's weight snapshots, which are not on this disk (a new machine): "
                    "add --redo bf16_s0 (ONLY=... REDO=bf16_s0) to retrain it with snapshots first")
    codes = schedule(pending, args, deadline, ckpt)
    table = queue_table(results, [Path(p) for p in args.repo_results], spec.JOBS)
    (out / "queue.md").write_text(table + "\n")
    with tarfile.open(out / "paper_runs.tgz", "w:gz") as tar:
        tar.add(results, arcname=".")
    log.info("call done in %.0f s; exit codes %s\n%s", time.time() - t_start, codes, table)
    return 0 if all(c == 0 for c in codes.values()) else 1


def cmd_estimate(args) -> int:
    print(spec.estimate_table(resolve_setting(args), args.budget_s))
    return 0


def cmd_status(args) -> int:
    print(queue_table(Path(args.ckpt_dir) / "results", [Path(p) for p in args.repo_results], spec.JOBS))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--setting", choices=sorted(SETTINGS), default="paper")
    common.add_argument("--ckpt-dir", default="/root/paper", help="run dirs + checkpoints (device disk)")
    common.add_argument("--device", default=None, help="torch device for the children (default: cuda if any)")
    common.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a Setting field, e.g. cuda_graph=false (a fallback; recorded per run)")
    common.add_argument("--save-margin-s", type=float, default=30.0, help="reserved for the last checkpoint")
    common.add_argument("--repo-results", action="append", default=[],
                        help="results dir(s) holding jobs done in earlier calls (skipped)")
    r = sub.add_parser("run", parents=[common], help="one device call: continue the queue")
    r.add_argument("--budget-s", type=float, default=555.0, help="wall seconds for this call")
    r.add_argument("--out", default=os.environ.get("OUT", "paper_out"))
    r.add_argument("--gpus", type=int, default=1, help="jobs at once, one per GPU (0 = one, no pinning)")
    r.add_argument("--only", default=None, help="comma-separated job names")
    r.add_argument("--redo", default=None, help="comma-separated jobs to run again although done "
                   "(e.g. bf16_s0, whose fidelity snapshots live on the device's disk only)")
    r.add_argument("--split", action=argparse.BooleanOptionalAction, default=True,
                   help="start a job that cannot finish in this call (resumed by the next)")
    r.add_argument("--min-start-s", type=float, default=150.0, help="no new job with less time left")
    r.add_argument("--grace-s", type=float, default=25.0)
    r.set_defaults(func=cmd_run)
    o = sub.add_parser("one", parents=[common], help="(internal) one job, until done or --deadline")
    o.add_argument("job")
    o.add_argument("--deadline", type=float, required=True, help="absolute time.time() to stop by")
    o.set_defaults(func=cmd_one)
    e = sub.add_parser("estimate", parents=[common], help="device time of the queue")
    e.add_argument("--budget-s", type=float, default=555.0)
    e.set_defaults(func=cmd_estimate)
    s = sub.add_parser("status", parents=[common], help="the queue's state")
    s.set_defaults(func=cmd_status)
    return p


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
