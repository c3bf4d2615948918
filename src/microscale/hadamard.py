"""Random Hadamard transform (RHT), SPEC §4.

The wgrad GEMM ``dW = dyᵀ x`` reduces over tokens, where outliers in a few tokens inflate a
block's scale and flush its other 15 elements to zero. Rotating each d-chunk of the
reduction dimension by an orthogonal matrix spreads an outlier over d elements first:

    M = diag(s) · H_d / sqrt(d),        y_chunk = x_chunk @ M

``H_d`` is the Sylvester Hadamard matrix, ``H[i][j] = (-1)^popcount(i & j)``, and ``s`` a fixed
±1 sign vector (for d = 16 the SPEC vector; for other sizes a fixed seeded vector, the same in
every process and torch version). Because ``M Mᵀ = I``, rotating both GEMM operands leaves
the product unchanged: ``(A M)(B M)ᵀ = A Bᵀ`` up to rounding.

Numerics: the chunk product is accumulated in fp32 and rounded to the input dtype (bf16 in
training), exactly as a fused kernel does. Cost: a [.., d] × [d, d] matmul per chunk.

Where ``1/sqrt(d)`` is a power of two (d = 4, 16, 64) the entries of M are exact in any float
format, every product ``x·M[j][k]`` is exact, and the chunk sum is the same in every summation
order whenever it is exact in fp32 (bf16 data in practice). For d = 2, 8, 32, 128 the entry
``c = fp32(1/sqrt(d))`` has a long significand; a product ``x·c`` would round, and the bits
would depend on how an implementation adds. So there the product is taken as
``(x_chunk @ (diag(s)·H·2^-e)) · (c·2^e)`` with ``2^-e`` the largest power of two below
``1/sqrt(d)``: the ``±2^-e`` products and their sum are exact under the same condition, and the
one multiply by ``c·2^e`` (exact: c scaled by a power of two) rounds the exact ``x_chunk @ M``
once. That is the correctly rounded value of the spec's product, and a kernel summing in any
order (tensor cores included) reproduces it bit for bit (:func:`rht_factors`).

Edges (the rotation of a finite x is always finite, and the same in every summation order):

* the input is first clamped to ``±L(d) = ±2^(127 − ⌈log2(d)/2⌉)`` (2^125 for d = 16). Then
  every partial sum is at most ``sqrt(d) · L ≤ 2^127``, so no fp32 sum can overflow, whatever
  order a kernel adds in (an overflowing sum would be ±Inf in one order and NaN in another).
  Only |x| above ~4e37 is affected; ±Inf (``check_finite=False``) is clamped like them;
* the fp32 result is rounded to the input dtype with saturation to its ±max: for fp16 a
  rotated value above 65504 (reachable from |x| > 16376) becomes ±65504, not Inf;
* NaN stays NaN and spreads to its whole d-chunk (every output sums every input).
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch

from .validate import check_rht_size

__all__ = ["RHT_SIGNS_16", "hadamard_matrix", "rht_signs", "rht_matrix", "rht_factors", "rht",
           "rht_inverse", "rht_input_limit"]

RHT_SIGNS_16 = (1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1)
_RHT_SEED = 0x5EED_F4


def _check_d(d: int) -> None:
    check_rht_size(d, "d")


def hadamard_matrix(d: int) -> torch.Tensor:
    """Unnormalised Sylvester Hadamard matrix ``H[i][j] = (-1)^popcount(i & j)`` (fp32)."""
    _check_d(d)
    i = torch.arange(d)
    bits = (i[:, None] & i[None, :])
    parity = torch.zeros_like(bits)
    while bool(bits.any()):
        parity ^= bits & 1
        bits = bits >> 1
    return (1 - 2 * parity).to(torch.float32)


def rht_signs(d: int) -> tuple[int, ...]:
    """The fixed sign vector for size d: SPEC's vector for 16, else a splitmix64-seeded one."""
    _check_d(d)
    if d == 16:
        return RHT_SIGNS_16
    signs, state = [], _RHT_SEED + d
    for _ in range(d):
        state = (state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        signs.append(1 if ((z ^ (z >> 31)) & 1) else -1)
    return tuple(signs)


@lru_cache(maxsize=None)
def _rht_matrix_cpu(d: int) -> torch.Tensor:
    s = torch.tensor(rht_signs(d), dtype=torch.float32)
    return (s[:, None] * hadamard_matrix(d)) / math.sqrt(d)


def rht_matrix(d: int = 16, device: torch.device | str | None = None) -> torch.Tensor:
    """``M = diag(s) · H_d / sqrt(d)`` as fp32 ``[d, d]`` on ``device``."""
    return _rht_matrix_cpu(d).to(device or "cpu", copy=True)  # never hand out the cached one


@lru_cache(maxsize=None)
def rht_factors(d: int) -> tuple[float, float]:
    """``(2^-e, post)`` with ``M = diag(s)·H·2^-e·post`` exactly in fp32 (module docstring):
    ``(c, 1.0)`` where ``c = |M[j][k]|`` is a power of two, else ``2^-e`` the largest power of
    two below ``1/sqrt(d)`` and ``post = c·2^e`` (exact)."""
    c = float(_rht_matrix_cpu(d).abs().max())
    if c == 2.0 ** math.floor(math.log2(c)):
        return c, 1.0
    pre = 2.0 ** math.floor(math.log2(c))
    return pre, c / pre


def rht_input_limit(d: int) -> float:
    """``L(d) = 2^(127 − ⌈log2(d)/2⌉)``: |x| above it is clamped before rotating (above)."""
    log2_d = check_rht_size(d, "d").bit_length() - 1
    return 2.0 ** (127 - (log2_d + 1) // 2)


def _chunk_product(chunks: torch.Tensor, m: torch.Tensor, d: int) -> torch.Tensor:
    """``chunks @ m`` for ``m`` = M or Mᵀ, as the module docstring says: one matmul where M's
    entries are powers of two, else the ±2^-e matmul (exact) times ``c·2^e`` (one rounding)."""
    pre, post = rht_factors(d)
    if post == 1.0:
        return chunks @ m
    return (chunks @ (torch.sign(m) * pre)) * post


def _apply(x: torch.Tensor, m: torch.Tensor, d: int, what: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{what} expects a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{what} needs a floating-point tensor, got {x.dtype}")
    if x.dim() == 0 or x.shape[-1] % d:
        last = x.shape[-1] if x.dim() else "a scalar"
        raise ValueError(f"{what}: last dimension ({last}) must be a multiple of the RHT "
                         f"size d={d}")
    limit, top = rht_input_limit(d), torch.finfo(x.dtype).max
    chunks = x.float().clamp(-limit, limit).reshape(*x.shape[:-1], x.shape[-1] // d, d)
    y = _chunk_product(chunks, m, d)
    return y.clamp(-top, top).reshape(x.shape).to(x.dtype)              # clamp keeps NaN


def rht(x: torch.Tensor, d: int = 16) -> torch.Tensor:
    """Rotate each d-chunk of the last dimension: ``y = x_chunk @ M``. Output in x's dtype."""
    _check_d(d)
    return _apply(x, rht_matrix(d, getattr(x, "device", None)), d, "rht")


def rht_inverse(y: torch.Tensor, d: int = 16) -> torch.Tensor:
    """Undo :func:`rht` (``M`` is orthogonal, so the inverse is ``Mᵀ``)."""
    _check_d(d)
    return _apply(y, rht_matrix(d, getattr(y, "device", None)).t(), d, "rht_inverse")
