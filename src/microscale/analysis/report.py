"""``AnalysisReport``: the per-layer table ``ms.analyze`` returns, its ranking and its advice.

Each entry of ``report.layers`` is a dict::

    name, index (depth: order of the first forward call), converted, recipe,
    in_features, out_features, tokens,
    sqnr_db / rel_err          {operand or output key: float | None}
    flush_frac / sat_frac / amax / scale_min / scale_median / scale_max / scale_zero_frac
                               {operand key: float | None}

with operand keys ``fprop.x fprop.w dgrad.dy dgrad.w wgrad.dy wgrad.x`` and output keys
``fprop.y dgrad.dx wgrad.dw`` (``None``: that GEMM runs in high precision).
A *metric* names one number of a layer as ``"<key>/<name>"``, e.g. ``"wgrad.dw/rel_err"`` or
``"wgrad.x/sqnr_db"``, or is ``"sensitivity"``:

    sensitivity = mean of rel_err over the layer's quantized GEMM outputs (y, dx, dW)

i.e. how far, relatively, the three products the layer contributes to training move when the
recipe quantizes them. Ranking is most sensitive first: descending for errors and fractions,
ascending for ``sqnr_db``. ``recommend(budget)`` returns the ``ceil(budget · n)`` most
sensitive layer names (``by="layer"``), or every analyzed layer of the ``ceil(budget · n)``
most sensitive blocks (``by="block"``; a block is a name prefix ``<...>.blocks.<i>`` or
``layers``/``h``/``layer``, scored by its worst layer); the list goes straight into
``ms.convert(model, recipe, keep_high_precision=names)``.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile

__all__ = ["AnalysisReport", "metric_value", "block_of"]

_BLOCK_RE = re.compile(r"^(.*?(?:^|\.)(?:blocks|layers|layer|h)\.\d+)(?:\.|$)")
_TABLE_KEYS = ("fprop.x", "fprop.w", "dgrad.dy", "dgrad.w", "wgrad.dy", "wgrad.x")
_OUT_KEYS = ("fprop.y", "dgrad.dx", "wgrad.dw")


def block_of(name: str) -> str:
    """The block prefix of a module name (``"blocks.3"`` for ``"blocks.3.mlp.fc1"``), else name."""
    m = _BLOCK_RE.match(name)
    return m.group(1) if m else name


def metric_value(layer: dict, metric: str) -> float | None:
    """One number of a layer dict, addressed as ``"sensitivity"`` or ``"<key>/<name>"``."""
    if metric == "sensitivity":
        errs = [layer["rel_err"][k] for k in _OUT_KEYS if layer["rel_err"].get(k) is not None]
        return sum(errs) / len(errs) if errs else None
    key, sep, name = metric.partition("/")
    if not sep or name not in layer or not isinstance(layer[name], dict) or key not in layer[name]:
        raise ValueError(f"unknown metric {metric!r}: use 'sensitivity' or '<key>/<name>' with "
                         f"key in {_TABLE_KEYS + _OUT_KEYS} and name e.g. rel_err, sqnr_db, "
                         "flush_frac, sat_frac, scale_zero_frac")
    return layer[name][key]


def _higher_is_worse(metric: str) -> bool:
    return not metric.endswith("sqnr_db")


class AnalysisReport:
    """Per-layer diagnostics of one batch under one recipe (see the module docstring)."""

    def __init__(self, layers: list[dict], recipe: str | None = None,
                 skipped: list | None = None, meta: dict | None = None):
        self.layers = sorted(layers, key=lambda row: row["index"])
        self.recipe = recipe
        self.skipped = [tuple(s) for s in (skipped or [])]
        self.meta = dict(meta or {})

    @property
    def names(self) -> list[str]:
        return [row["name"] for row in self.layers]

    def __len__(self) -> int:
        return len(self.layers)

    # ------------------------------------------------------------------ ranking
    def rank(self, metric: str = "sensitivity") -> list[tuple[str, float]]:
        """``[(name, value)]``, most sensitive first; layers where the metric is None go last."""
        worse_high = _higher_is_worse(metric)
        scored = [(row["name"], metric_value(row, metric), row["index"]) for row in self.layers]
        known = [s for s in scored if s[1] is not None and not math.isnan(s[1])]
        unknown = [s for s in scored if s not in known]
        known.sort(key=lambda s: (-s[1] if worse_high else s[1], s[2]))
        return [(n, v) for n, v, _ in known + unknown]

    def recommend(self, budget: float = 0.15, metric: str = "sensitivity",
                  by: str = "layer") -> list[str]:
        """Module names to keep in high precision (``keep_high_precision=`` of ``ms.convert``)."""
        if not 0.0 <= budget <= 1.0:
            raise ValueError(f"budget must be in [0, 1], got {budget}")
        if by not in ("layer", "block"):
            raise ValueError(f"by must be 'layer' or 'block', got {by!r}")
        ranked = self.rank(metric)
        if by == "layer":
            return [name for name, _ in ranked[:math.ceil(budget * len(ranked) - 1e-9)]]
        blocks: list[str] = []
        for name, _ in ranked:                  # a block ranks where its worst layer ranks
            if block_of(name) not in blocks:
                blocks.append(block_of(name))
        chosen = set(blocks[:math.ceil(budget * len(blocks) - 1e-9)])
        return [row["name"] for row in self.layers if block_of(row["name"]) in chosen]

    # ------------------------------------------------------------------ output
    def to_dict(self) -> dict:
        return {"recipe": self.recipe, "meta": self.meta, "layers": self.layers,
                "skipped": [list(s) for s in self.skipped]}

    @classmethod
    def from_dict(cls, d: dict) -> "AnalysisReport":
        return cls(d["layers"], d.get("recipe"), d.get("skipped"), d.get("meta"))

    def to_json(self, path: str | os.PathLike) -> None:
        """Write ``to_dict()`` atomically (temp file + rename); ±inf/NaN are written as null."""
        text = json.dumps(_finite(self.to_dict()), indent=1, allow_nan=False)
        path = os.fspath(path)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> "AnalysisReport":
        with open(path) as f:
            return cls.from_dict(json.load(f))

    def __str__(self) -> str:
        head = (f"{'#':>3} {'layer':<28}" + "".join(f"{k:>9}" for k in _TABLE_KEYS)
                + "".join(f"{k + ' err':>12}" for k in ("y", "dx", "dW"))
                + f"{'flush':>7}{'zeroS':>7}")
        lines = [f"ms.analyze: recipe {self.recipe}, {len(self.layers)} layers "
                 f"(SQNR dB per operand; relative error per output; worst flush/zero-scale %)",
                 head, "-" * len(head)]
        for row in self.layers:
            cells = "".join(_fmt(row["sqnr_db"][k], 9, ".1f") for k in _TABLE_KEYS)
            cells += "".join(_fmt(row["rel_err"][k], 12, ".4f") for k in _OUT_KEYS)
            flush = _worst(row["flush_frac"])
            zero = _worst(row["scale_zero_frac"])
            lines.append(f"{row['index']:>3} {row['name'][-28:]:<28}{cells}"
                         f"{_fmt(None if flush is None else 100 * flush, 7, '.2f')}"
                         f"{_fmt(None if zero is None else 100 * zero, 7, '.2f')}")
        lines += [f"skipped {name}: {why}" for name, why in self.skipped]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"AnalysisReport(recipe={self.recipe!r}, layers={len(self.layers)})"


def _worst(values: dict) -> float | None:
    known = [v for v in values.values() if v is not None]
    return max(known) if known else None


def _fmt(v, width: int, spec: str) -> str:
    return f"{'-':>{width}}" if v is None else f"{v:>{width}{spec}}"


def _finite(obj):
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj
