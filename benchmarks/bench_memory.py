"""Where a training step's peak GPU memory goes, per recipe: the live tensors at the peak,
grouped by the code that allocated them (issue 11, item 6).

``torch.cuda.max_memory_allocated`` says how high a step goes, not what is there. This script
records one training step (after warm-up, the model compiled as ``bench_train.py`` does) with
``torch.cuda.memory._record_memory_history`` and replays the allocator's trace:

    live(t) = allocated before the step + Σ allocs − Σ frees  up to event t

The peak is the event where ``live`` is largest; the tensors alive there are grouped by their
allocation site: the innermost Python frame outside torch's own modules (an Inductor output
file and line, a microscale op, the model), shown with its source line. What was allocated
before the recorded step (weights, gradients, AdamW state, caches) is one row.

    python benchmarks/bench_memory.py --models 1b --recipes bf16,fp8_blockwise [--top 25]

CUDA only (it reads the CUDA caching allocator's trace); on another device it says so and
exits. Prints a table per recipe (MB per site, bf16's figure beside where the site is shared)
and ends with one JSON line.
"""

from __future__ import annotations

import argparse
import linecache
import sys
from collections import defaultdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_train
import common

from microscale.train.trainer import compile_blocks

BEFORE = "allocated before the step (weights, grads, AdamW state, caches)"
_SKIP = ("/torch/", "/contextlib.py", "/functools.py", "<frozen", "/triton/")


def peak_live(events: list[dict], before_bytes: int) -> tuple[int, int, dict[int, tuple[int, list]]]:
    """Replay an allocator trace: (peak bytes, bytes of the pre-step allocations still alive at
    the peak, {addr: (size, frames)} of the step's allocations alive at the peak).

    ``events`` are the trace entries of one device (``action`` alloc / free_requested /
    free_completed, ``addr``, ``size``, ``frames``); a free of an address the trace never saw
    allocated was allocated before the recording (it lowers ``before``)."""
    def replay(stop: int | None):
        live, before, total, best, best_at = {}, before_bytes, before_bytes, before_bytes, -1
        for i, ev in enumerate(events):
            if stop is not None and i > stop:
                break
            act, addr = ev.get("action"), ev.get("addr")
            if act == "alloc":
                live[addr] = (ev["size"], ev.get("frames", []))
                total += ev["size"]
            elif act in ("free_requested", "free_completed"):
                if addr in live:
                    total -= live.pop(addr)[0]
                elif act == "free_requested":       # allocated before the recording began
                    before -= ev["size"]
                    total -= ev["size"]
            if total > best:
                best, best_at = total, i
        return live, before, best, best_at
    _, _, best, best_at = replay(None)
    live, before, _, _ = replay(best_at)
    return best, before, live


def site(frames: list[dict]) -> str:
    """The allocation site: the innermost frame outside torch/contextlib/triton, with its line."""
    for fr in frames:
        name = fr.get("filename", "")
        if not name or any(s in name for s in _SKIP) and "torchinductor" not in name:
            continue
        text = linecache.getline(name, fr.get("line", 0)).strip()
        where = f"{Path(name).name}:{fr.get('line')} {fr.get('name', '')}"
        return f"{where}  `{text[:70]}`" if text else where
    return "(no Python frame: a C++ or autograd-engine allocation)"


def by_site(live: dict[int, tuple[int, list]]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for size, frames in live.values():
        out[site(frames)] += size
    return dict(out)


def measure(model_name: str, recipe: str, args, device: torch.device) -> dict:
    """One recipe (``recipe@setting`` as in ``bench_train.py``): build, compile, warm up, then
    record one step and analyse its peak."""
    with bench_train.kernel_settings(recipe):
        return _measure(model_name, recipe, args, device)


def _measure(model_name: str, recipe: str, args, device: torch.device) -> dict:
    model, _, x, y = bench_train.setup(model_name, recipe, args, device)
    compile_blocks(model, "default")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    for _ in range(args.warmup):
        bench_train.train_step(model, opt, x, y)
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.memory._record_memory_history(max_entries=2_000_000, context="alloc", stacks="python")
    bench_train.train_step(model, opt, x, y)
    torch.cuda.synchronize(device)
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    events = snap["device_traces"][device.index or 0]
    peak, before_left, live = peak_live(events, before)
    sites = by_site(live)
    sites[BEFORE] = before_left
    row = {"model": model_name, "recipe": recipe, "peak_gb": peak / 1e9,
           "max_allocated_gb": torch.cuda.max_memory_allocated(device) / 1e9,
           "before_gb": before / 1e9, "events": len(events),
           "sites_mb": {k: round(v / 1e6, 1) for k, v in sorted(sites.items(), key=lambda kv: -kv[1])
                        if v >= 1e6}}                  # sites of 1 MB or more
    del model, opt
    bench_train._free(device)
    return row


def table(row: dict, base: dict | None, top: int) -> str:
    lines = [(f"### {row['model']} {row['recipe']}: peak {row['peak_gb']:.2f} GB by the trace, "
             f"max_memory_allocated {row['max_allocated_gb']:.2f} GB, {row['events']} events"),
             "| MB at the peak | bf16's MB at its peak | allocation site |", "|---:|---:|---|"]
    base_sites = base["sites_mb"] if base else {}
    for name, mb in list(row["sites_mb"].items())[:top]:
        lines.append(f"| {mb:,.1f} | {base_sites.get(name, '')} | {name} |")
    rest = sum(list(row["sites_mb"].values())[top:])
    lines.append(f"| {rest:,.1f} | | ({max(0, len(row['sites_mb']) - top)} more sites) |")
    return "\n".join(lines)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="1b")
    p.add_argument("--recipes", default="bf16,fp8_blockwise")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    if device.type != "cuda":
        sys.exit("bench_memory.py reads the CUDA caching allocator's trace: run it on a CUDA device")
    print(common.env_header(), flush=True)
    rows = []
    for model_name in args.models.split(","):
        base = None
        for recipe in args.recipes.split(","):
            try:
                row = measure(model_name, recipe, args, device)
            except Exception as err:              # one failing run must not lose the others
                row = {"model": model_name, "recipe": recipe, "error": f"{type(err).__name__}: {err}"[:300]}
                bench_train._free(device)
                print(f"FAILED {model_name} {recipe}: {row['error']}", flush=True)
            rows.append(row)
            if "error" not in row:
                base = row if recipe == "bf16" else base
                print(table(row, None if row is base else base, args.top), flush=True)
    payload = {"bench": "memory", "argv": sys.argv[1:], "rows": rows}
    common.json_line(payload)
    return payload


if __name__ == "__main__":
    main()
