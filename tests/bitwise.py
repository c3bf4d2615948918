"""Bitwise comparison of quantized views for the kernel tests. (tests/ is on sys.path.)"""

from __future__ import annotations

import torch


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equal codes, or expanded values bitwise equal apart from NaN payloads: NaN
    where NaN (the reference's expanded NaN is 0xFFFF, the kernels' 0x7FC0; a NaN block's
    scale byte says NaN either way), every other value bit for bit."""
    if not a.dtype.is_floating_point:
        return torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    nan = b.isnan()
    return torch.equal(a.isnan(), nan) and torch.equal(a[~nan].view(torch.int16),
                                                       b[~nan].view(torch.int16))
