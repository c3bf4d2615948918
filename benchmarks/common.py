"""Helpers shared by the benchmark scripts: timing, the device's copy rate, headers, JSON.

    import common
    print(common.env_header())              # GPU, torch, triton, CUDA, date (one line)
    ms = common.bench_ms(fn)                # median milliseconds (do_bench on CUDA)
    gbs = common.copy_bandwidth_gbs(dev)    # measured device-to-device copy, read + written
    common.json_line({"bench": ..., ...})   # the machine-readable last line of the output

Timing on CUDA is ``triton.testing.do_bench`` with ``return_mode="median"``: CUDA events
around each call, the L2 flushed between calls, warm-up first. On CPU a wall clock with the
same median rule, so the scripts also run (slowly) without a GPU.
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
import statistics
import time

import torch

__all__ = ["bench_ms", "copy_bandwidth_gbs", "env_header", "env_info", "json_line", "fmt_table"]


def bench_ms(fn, warmup_ms: int = 25, rep_ms: int = 100) -> float:
    """Median time of ``fn()`` in milliseconds."""
    if torch.cuda.is_available():
        import triton.testing
        return float(triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms,
                                             return_mode="median"))
    fn()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def graph_ms(fn) -> float | None:
    """Median time of ``fn`` replayed from a CUDA graph: the kernels without host overhead
    (None where ``fn`` cannot be captured, or off CUDA)."""
    if not torch.cuda.is_available():
        return None
    try:
        from microscale.train.speed import warmup_stream     # one stream: no workspace leak
        side = warmup_stream(torch.device("cuda"))
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        return bench_ms(graph.replay)
    except RuntimeError:   # e.g. an op that cannot be captured
        return None


def copy_bandwidth_gbs(device: torch.device | str | None = None, nbytes: int = 1 << 30) -> float:
    """Device-to-device copy rate in GB/s (1e9 B/s), counting bytes read plus bytes written."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cpu":
        nbytes = min(nbytes, 1 << 26)
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).random_()
    dst = torch.empty_like(src)
    ms = bench_ms(lambda: dst.copy_(src))
    src = dst = None                    # freed now
    return 2 * nbytes / (ms * 1e-3) / 1e9


def env_info() -> dict:
    info = {"date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "torch": torch.__version__, "python": platform.python_version()}
    try:
        import triton
        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, sms=props.multi_processor_count, cuda=torch.version.cuda)
    else:
        info.update(gpu=None, cpu=platform.processor() or platform.machine())
    return info


def env_header() -> str:
    """One line naming the hardware and software the numbers come from."""
    return "# " + " | ".join(f"{k}: {v}" for k, v in env_info().items() if v is not None)


def fmt_table(rows: list[dict], columns: list[str]) -> str:
    """Plain fixed-width table of ``rows`` (dicts) over ``columns``."""
    cells = [[_fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.0f}"
    return str(v)


def json_line(payload: dict) -> None:
    """Print ``payload`` (with the environment added) as the last, machine-readable line."""
    print(json.dumps({"env": env_info(), **payload}, default=str), flush=True)


def zoo_linears(models) -> list[tuple[str, str, int, int]]:
    """``(model, name, in, out)`` of each block linear of the zoo ``models``
    (``train.model.MODEL_CONFIGS``): q/o, k/v, up, down (relu² MLP widths)."""
    from microscale.train.model import MODEL_CONFIGS
    out = []
    for model in models:
        cfg = MODEL_CONFIGS[model]
        d, kv, ffn = cfg.d_model, cfg.kv_dim, cfg.hidden_dim
        out += [(model, "q/o", d, d), (model, "k/v", d, kv), (model, "up", d, ffn),
                (model, "down", ffn, d)]
    return out
