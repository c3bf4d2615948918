"""``ms.quantize``: one entry point for every format, dispatched to a reference or a kernel.

    q = ms.quantize(x, "nvfp4", block_2d=False, rht=False, stochastic=False, generator=None)
    q = ms.quantize(x, "mxfp8_e4m3" | "mxfp8_e5m2" | "mxfp4", scale_rounding="ceil")
    q = ms.quantize(x, "fp8_block", block=(1, 128), pow2_scales=True)
    q = ms.quantize(x, "fp8_tensor", fp8_dtype=torch.float8_e4m3fn, pow2_scales=False)

Options a format does not take are rejected by name (a typo never silently does nothing), and
every option is checked for kind and value before the op runs (:mod:`microscale.validate`).
Layouts are documented in :mod:`microscale.tensor`. Both functions run through the
``microscale::quantize`` / ``microscale::quantize_rowcol`` custom ops (:mod:`microscale.ops`),
so they trace under ``torch.compile``. Stochastic rounding takes its random bytes from a
``seed`` tensor (drawn from ``generator``, or torch's default generator, when not given).
"""

from __future__ import annotations

import torch

from .ops import quantize_view, quantize_views
from .tensor import QFormat, QuantizedTensor
from .validate import check_backend, check_quantize_options

__all__ = ["quantize", "quantize_rowcol", "dequantize", "FORMATS"]

FORMATS = tuple(f.value for f in QFormat)


def quantize(x: torch.Tensor, fmt: str | QFormat = "nvfp4", *, backend: str = "auto",
             **options) -> QuantizedTensor:
    """Quantize ``x`` along its last dimension to ``fmt``; see the module docstring."""
    fmt = QFormat.parse(fmt)
    check_backend(backend)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"quantize expects a torch.Tensor, got {type(x).__name__}")
    options = check_quantize_options(fmt, options, x)
    return quantize_view(x, fmt, options, backend)


def quantize_rowcol(x: torch.Tensor, row: tuple | None, col: tuple | None, *,
                    backend: str = "auto") -> tuple[QuantizedTensor | None, QuantizedTensor | None]:
    """Quantize ``x`` viewed as ``[rows, cols]`` both ways in one call.

    ``row = (fmt, options)`` quantizes along ``cols`` (as :func:`quantize` would);
    ``col = (fmt, options)`` quantizes the transpose ``[cols, rows]`` along ``rows``. Either may
    be None. A linear layer needs both views of x and of dy (fprop/dgrad use the row-wise one,
    wgrad the column-wise one, often with the RHT); a fused kernel reads x once for both.
    """
    check_backend(backend)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"quantize_rowcol expects a torch.Tensor, got {type(x).__name__}")
    if x.dim() == 0 or not x.numel():
        raise ValueError(f"quantize_rowcol: need a non-empty tensor with at least 1 dim, "
                         f"got shape {tuple(x.shape)}")
    x2 = x.reshape(-1, x.shape[-1])
    parsed = [_parse_view(view, name, xv)
              for view, name, xv in ((row, "row", x2), (col, "col", x2.t()))]
    return quantize_views(x, *parsed, backend)


def _parse_view(view, name: str, xv: torch.Tensor) -> tuple[QFormat, dict] | None:
    """``None`` or ``(fmt, options dict)`` for one view of quantize_rowcol, validated."""
    if view is None:
        return None
    if not isinstance(view, (tuple, list)) or len(view) != 2 or not isinstance(view[1], dict):
        raise TypeError(f"quantize_rowcol: {name} must be None or a (format, options dict) "
                        f"pair, got {view!r}")
    try:
        fmt = QFormat.parse(view[0])
        return fmt, check_quantize_options(fmt, view[1], xv, where=f"quantize_rowcol {name}")
    except (TypeError, ValueError) as err:      # say which view the option belongs to
        raise type(err)(f"quantize_rowcol {name} view: {err}") from None


def dequantize(q: QuantizedTensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Functional form of :meth:`QuantizedTensor.dequantize`."""
    if not isinstance(q, QuantizedTensor):
        raise TypeError(f"dequantize expects a QuantizedTensor, got {type(q).__name__}")
    return q.dequantize(dtype)
