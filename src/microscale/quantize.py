"""``ms.quantize``: one entry point for every format, dispatched to a reference or a kernel.

    q = ms.quantize(x, "nvfp4", block_2d=False, rht=False, stochastic=False, generator=None)
    q = ms.quantize(x, "mxfp8_e4m3" | "mxfp8_e5m2" | "mxfp4", scale_rounding="ceil")
    q = ms.quantize(x, "fp8_block", block=(1, 128), pow2_scales=True)
    q = ms.quantize(x, "fp8_tensor", fp8_dtype=torch.float8_e4m3fn, pow2_scales=False)

Options a format does not take are rejected by name (a typo never silently does nothing).
Layouts are documented in :mod:`microscale.tensor`. Both functions run through the
``microscale::quantize`` / ``microscale::quantize_rowcol`` custom ops (:mod:`microscale.ops`),
so they trace under ``torch.compile``. Stochastic rounding takes its random bytes from a
``seed`` tensor (drawn from ``generator``, or torch's default generator, when not given).
"""

from __future__ import annotations

import torch

from .ops import quantize_view, quantize_views
from .tensor import QFormat, QuantizedTensor

__all__ = ["quantize", "quantize_rowcol", "dequantize", "FORMATS"]

FORMATS = tuple(f.value for f in QFormat)

_COMMON = {"check_finite"}
_OPTIONS = {
    QFormat.NVFP4: {"block_2d", "rht", "rht_d", "stochastic", "generator", "seed", "amax",
                    "rand_bits"},
    QFormat.MXFP8_E4M3: {"scale_rounding"},
    QFormat.MXFP8_E5M2: {"scale_rounding"},
    QFormat.MXFP4: {"scale_rounding", "rht", "rht_d", "stochastic", "generator", "seed",
                    "rand_bits"},
    QFormat.FP8_BLOCK: {"block", "pow2_scales", "fp8_dtype"},
    QFormat.FP8_TENSOR: {"fp8_dtype", "pow2_scales", "scale"},
}


def quantize(x: torch.Tensor, fmt: str | QFormat = "nvfp4", *, backend: str = "auto",
             **options) -> QuantizedTensor:
    """Quantize ``x`` along its last dimension to ``fmt``; see the module docstring."""
    fmt = QFormat.parse(fmt)
    _check_options(fmt, options)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"quantize expects a torch.Tensor, got {type(x).__name__}")
    return quantize_view(x, fmt, options, backend)


def _check_options(fmt: QFormat, options: dict) -> None:
    unknown = set(options) - _OPTIONS[fmt] - _COMMON
    if unknown:
        allowed = ", ".join(sorted(_OPTIONS[fmt] | _COMMON))
        raise TypeError(f"quantize({fmt.value!r}) got unexpected option(s) "
                        f"{', '.join(sorted(unknown))}; it accepts: {allowed}")


def quantize_rowcol(x: torch.Tensor, row: tuple | None, col: tuple | None, *,
                    backend: str = "auto") -> tuple[QuantizedTensor | None, QuantizedTensor | None]:
    """Quantize ``x`` viewed as ``[rows, cols]`` both ways in one call.

    ``row = (fmt, options)`` quantizes along ``cols`` (as :func:`quantize` would);
    ``col = (fmt, options)`` quantizes the transpose ``[cols, rows]`` along ``rows``. Either may
    be None. A linear layer needs both views of x and of dy (fprop/dgrad use the row-wise one,
    wgrad the column-wise one, often with the RHT); a fused kernel reads x once for both.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"quantize_rowcol expects a torch.Tensor, got {type(x).__name__}")
    parsed = []
    for view in (row, col):
        if view is None:
            parsed.append(None)
            continue
        fmt, opts = QFormat.parse(view[0]), dict(view[1])
        _check_options(fmt, opts)
        parsed.append((fmt, opts))
    if x.dim() == 0 or not x.numel():
        raise ValueError(f"quantize_rowcol: need a non-empty tensor with at least 1 dim, "
                         f"got shape {tuple(x.shape)}")
    return quantize_views(x, *parsed, backend)


def dequantize(q: QuantizedTensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Functional form of :meth:`QuantizedTensor.dequantize`."""
    return q.dequantize(dtype)
