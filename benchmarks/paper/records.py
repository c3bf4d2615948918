"""What the paper driver writes and the page generator reads: compact logs and job status.

Every file is written atomically (temp file + rename), so a call killed at any moment leaves
either the previous version or the new one. Formats:

    results/<job>/metrics.jsonl   the harness's records, subsampled by :func:`compact_metrics`:
                                  every record whose step is a multiple of ``every`` (16), every
                                  record with a ``val_loss``, and the last one
    results/<job>/status.json     {"job", "recipe", "seed", "step", "steps", "done", "diverged",
                                  "wall_s", "pieces": [{"started", "wall_s", "step_from",
                                  "step_to", "steps", "outcome", "device", "torch", "triton",
                                  "python", "train_time_s"}, ...]}
    results/corpus/               summary.json (hash, sizes, roots) + manifest.tsv.gz
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

__all__ = ["compact_metrics", "corpus_evidence", "load_status", "piece_record", "queue_table",
           "read_metrics", "write_json"]


def write_json(path: Path, obj) -> None:
    from microscale.train.checkpoint import atomic_write_text

    atomic_write_text(path, json.dumps(obj, indent=1, default=str))


def load_status(job_dir: Path) -> dict | None:
    path = Path(job_dir) / "status.json"
    return json.loads(path.read_text()) if path.exists() else None


def read_metrics(job_dir: Path) -> list[dict]:
    path = Path(job_dir) / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def compact_metrics(records: list[dict], every: int = 16) -> list[dict]:
    """Every ``every``-th step, every eval, and the last record (see the module docstring)."""
    last = len(records) - 1
    return [r for i, r in enumerate(records) if r["step"] % every == 0 or "val_loss" in r or i == last]


def _versions() -> dict:
    import torch

    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {"torch": torch.__version__, "triton": triton_version, "python": platform.python_version()}


def piece_record(trainer, start_step: int, t0: float, outcome: str) -> dict:
    """One device call's share of a run: steps, wall time, outcome, device and versions."""
    from microscale.train.speed import device_name

    return {"started": dt.datetime.fromtimestamp(t0, dt.UTC).isoformat(timespec="seconds"),
            "wall_s": round(time.time() - t0, 1), "step_from": start_step, "step_to": trainer.step,
            "steps": trainer.cfg.steps, "outcome": outcome, "device": device_name(trainer.device),
            "train_time_s": round(trainer.train_time, 1), **_versions()}


def _gzip_atomic(src: Path, dest: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=dest.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz, \
                open(src, "rb") as f:
            shutil.copyfileobj(f, gz)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def corpus_evidence(setting, cache: Path, dest: Path) -> dict:
    """Build (or open) the setting's corpus and put its summary + gzipped manifest in ``dest``."""
    from microscale.train.data import load_data

    data = load_data(setting.data, str(cache), setting.max_bytes)
    dest.mkdir(parents=True, exist_ok=True)
    meta = dict(data.meta) or {"corpus": setting.data}
    meta.update(describe=data.describe(), train_tokens=len(data.train), val_tokens=len(data.val))
    if "manifest" in meta and not (dest / "manifest.tsv.gz").exists():
        _gzip_atomic(Path(meta["manifest"]), dest / "manifest.tsv.gz")
    write_json(dest / "summary.json", meta)
    return meta


def _state(status: dict | None) -> str:
    if status is None:
        return "pending"
    if status.get("diverged"):
        return f"diverged at step {status.get('step')}"
    if status.get("done"):
        return "done"
    return f"partial: step {status.get('step')}/{status.get('steps')}"


def queue_table(results: Path, repo_results: list[Path], jobs) -> str:
    """Markdown: each job's state, where its logs are, and its wall time so far."""
    lines = ["| job | state | logs | wall s |", "|---|---|---|---:|"]
    for job in jobs:
        found = [(s, where) for s, where in [(load_status(results / job.name), "this lease's results")] +
                 [(load_status(r / job.name), "repo") for r in repo_results] if s]
        status, where = next(((s, w) for s, w in found if s.get("done")), found[0] if found else (None, "-"))
        wall = f"{status['wall_s']:.0f}" if status and "wall_s" in status else ""
        lines.append(f"| {job.name} | {_state(status)} | {where} | {wall} |")
    return "\n".join(lines)
