"""PNG plots of an :class:`AnalysisReport` (matplotlib, Agg backend, no display needed).

* :func:`plot_heatmap`: layers (rows, in depth order) × operand/output keys (columns), colour =
  one metric (default SQNR in dB: dark = low SQNR = more quantization noise). Shows at a glance
  which GEMM operand is the weak one (in NVFP4: the gradients) and which layers stand out.
* :func:`plot_depth`: one or more metrics against layer depth, one line per metric (default:
  the relative error of dW and the wgrad operands' SQNR on a twin axis), with block boundaries
  marked; the paper's observation is that the last blocks are the sensitive ones.
* :func:`plot_report`: both, written into a directory; returns the paths.

matplotlib is imported inside the functions, so importing this module costs nothing.
"""

from __future__ import annotations

import os

from .report import AnalysisReport, block_of, metric_value

__all__ = ["plot_heatmap", "plot_depth", "plot_report"]

_KEYS = ("fprop.x", "fprop.w", "dgrad.dy", "dgrad.w", "wgrad.dy", "wgrad.x",
         "fprop.y", "dgrad.dx", "wgrad.dw")


def _pyplot():
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    return plt


def _matrix(report: AnalysisReport, metric: str, keys) -> list[list[float]]:
    nan = float("nan")
    rows = []
    for layer in report.layers:
        values = layer[metric]
        rows.append([nan if values.get(k) is None else float(values[k]) for k in keys])
    return rows


def plot_heatmap(report: AnalysisReport, path: str | os.PathLike, metric: str = "sqnr_db",
                 keys: tuple[str, ...] | None = None) -> str:
    """Layer × key heatmap of one per-key metric (``sqnr_db``, ``rel_err``, ``flush_frac``…)."""
    if not report.layers:
        raise ValueError("plot_heatmap: the report has no layers")
    if metric not in report.layers[0] or not isinstance(report.layers[0][metric], dict):
        raise ValueError(f"plot_heatmap: {metric!r} is not a per-key metric of the report")
    keys = tuple(k for k in (keys or _KEYS) if k in report.layers[0][metric])
    plt = _pyplot()
    data = _matrix(report, metric, keys)
    height = max(3.0, 0.22 * len(report.layers) + 1.5)
    fig, ax = plt.subplots(figsize=(1.0 * len(keys) + 3.5, height))
    cmap = "viridis" if metric == "sqnr_db" else "magma_r"
    im = ax.imshow(data, aspect="auto", cmap=cmap, interpolation="nearest")
    ax.set_xticks(range(len(keys)), keys, rotation=45, ha="right")
    ax.set_yticks(range(len(report.layers)), report.names, fontsize=7)
    fig.colorbar(im, ax=ax, label=metric)
    ax.set_title(f"{metric} per layer and GEMM operand ({report.recipe})")
    fig.tight_layout()
    fig.savefig(os.fspath(path), dpi=110)
    plt.close(fig)
    return os.fspath(path)


def plot_depth(report: AnalysisReport, path: str | os.PathLike,
               metrics: tuple[str, ...] = ("wgrad.dw/rel_err",),
               twin_metrics: tuple[str, ...] = ("wgrad.dy/sqnr_db", "wgrad.x/sqnr_db")) -> str:
    """Metrics against layer depth (x = layer index); ``twin_metrics`` on the right axis."""
    if not report.layers:
        raise ValueError("plot_depth: the report has no layers")
    plt = _pyplot()
    idx = [layer["index"] for layer in report.layers]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.18 * len(idx) + 3), 4))
    _lines(ax, report, metrics, idx, "o-")
    ax.set_xlabel("layer (depth order)")
    ax.set_ylabel(", ".join(metrics))
    if twin_metrics:
        ax2 = ax.twinx()
        _lines(ax2, report, twin_metrics, idx, "s--", start=len(metrics))
        ax2.set_ylabel(", ".join(twin_metrics))
        ax2.legend(loc="upper right", fontsize=8)
    ax.legend(loc="upper left", fontsize=8)
    names = report.names
    for i in range(1, len(names)):       # block boundaries
        if block_of(names[i]) != block_of(names[i - 1]):
            ax.axvline(idx[i] - 0.5, color="0.85", lw=0.8, zorder=0)
    ax.set_title(f"quantization error across depth ({report.recipe})")
    fig.tight_layout()
    fig.savefig(os.fspath(path), dpi=110)
    plt.close(fig)
    return os.fspath(path)


def _lines(ax, report, metrics, idx, style, start=0):
    for i, metric in enumerate(metrics):
        ys = [metric_value(layer, metric) for layer in report.layers]
        ys = [float("nan") if y is None else y for y in ys]
        ax.plot(idx, ys, style, ms=3, lw=1, label=metric, color=f"C{start + i}")


def plot_report(report: AnalysisReport, out_dir: str | os.PathLike, stem: str = "analysis") -> list[str]:
    """Heatmap (SQNR) and depth plot written as ``<stem>_heatmap.png`` / ``<stem>_depth.png``."""
    os.makedirs(out_dir, exist_ok=True)
    return [plot_heatmap(report, os.path.join(out_dir, f"{stem}_heatmap.png")),
            plot_depth(report, os.path.join(out_dir, f"{stem}_depth.png"))]
