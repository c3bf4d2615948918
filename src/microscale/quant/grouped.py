"""Grouped (mixture-of-experts) quantization: one token matrix, one quantized tensor per expert.

An MoE layer sorts its tokens by expert, so expert ``e`` owns the rows ``[start_e, end_e)`` of
one token matrix ``x [T, K]``, with ``end_e = offs[e]`` (``offs``: int32 group *end* offsets on
the device, as ``torch._grouped_mm`` takes them) and ``start_e = offs[e-1]`` (0 for e = 0).
Every expert is quantized as if it were its own tensor, exactly as ``ms.Linear`` would
quantize that expert's ``T_e`` tokens: its own NVFP4 global amax (its own FP8 tensorwise
scale), its own blocks, its own SR seed. Two views per tensor:

* **row view** (blocks along K; fprop's x, dgrad's dy): a block lies in one row, so blocks never
  straddle experts and the view keeps the layout of x, ``[T, K]``. Only the per-tensor
  quantities are per expert: the amax a row sees is its expert's.
* **column view** (blocks along the tokens; wgrad's xᵀ and dyᵀ): ``ms.Linear`` zero-pads an
  expert's ``T_e`` tokens up to the recipe's token multiple ``m`` (the wgrad block, and the RHT
  size) and quantizes ``x_eᵀ [K, ceil(T_e/m)·m]``. The grouped layout does the same for all
  experts at once: expert e's tokens are copied to the padded positions ``[pstart_e,
  pstart_e + T_e)`` of a zero matrix ``x_pad [bound, K]`` where ``pstart_e`` is the sum of the
  earlier experts' padded counts, a multiple of m. So every block (and every RHT chunk) of
  ``x_padᵀ`` lies inside one expert, a group whose size is not a multiple of m ends in a
  partial block filled with zeros, and an expert with no tokens takes no columns, exactly as
  ``ms.Linear`` would treat its tensor. ``bound = T + E·(m-1)`` rounded up to a multiple of
  lcm(128, m) is a static upper bound of the padded length (no host sync needed); the columns
  after the last group are zeros and belong to no expert.

::

    x [T, K]                     row view [T, K]          column view [K, bound]
    e0: rows 0..4   (5 tokens)   same rows                e0: cols  0..15  (5 + 11 zero pad)
    e1: rows -      (0 tokens)   -                        e1: -
    e2: rows 5..21 (17 tokens)   same rows                e2: cols 16..47 (17 + 15 zero pad)

Everything here is computed from ``offs`` with device ops (cumsum, searchsorted, scatter), so
nothing reads a group size on the host: :func:`group_layout` and :func:`quantize_segments` are
the sync-free path. :func:`microscale.ops_grouped.quantize_grouped_reference` is the spec it is
tested against: a loop over experts that quantizes each with the per-tensor quantizers.

Stochastic rounding on the sync-free path draws its bytes from :func:`segment_rand_bits`, a
counter-based hash of ``(expert seed, element index inside the expert's tensor)``: the bytes of an
expert depend on its seed and its own tokens only, never on the other experts. (The per-tensor
quantizers draw theirs from a seeded torch generator or in-kernel Philox: like those two, the
grouped path has its own stream; SPEC §5, "the same seed gives the same codes on the same
backend". Given the same bytes as ``rand_bits`` the reference gives the same codes.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..formats import (
    FLT_MAX,
    e2m1_encode,
    e2m1_stochastic_encode,
    fp8_cast_satfinite,
    pack_nibbles,
)
from ..hadamard import rht as _rht
from ..tensor import QFormat
from .common import NAN_BYTE_FP8, mark_nan, split_nan
from .fp8 import fp8_scale_from_amax
from .nvfp4 import _INV6, nvfp4_global_scales

__all__ = [
    "PER_TENSOR_FORMATS",
    "GroupLayout",
    "group_layout",
    "padded_bound",
    "quantize_segments",
    "segment_amax",
    "segment_rand_bits",
    "segment_sr_bytes",
]

# formats with a per-tensor quantity (NVFP4's amax, FP8 tensorwise's scale): per expert here
PER_TENSOR_FORMATS = (QFormat.NVFP4, QFormat.FP8_TENSOR)


@dataclass(frozen=True)
class GroupLayout:
    """Where each expert's tokens are, in the token matrix and in the padded column layout.

    Tensors are int64 ``[E]`` on the device; ``tokens`` (T), ``multiple`` (m) and ``bound`` are
    static Python ints (shapes only).
    """

    offs: torch.Tensor           # group end offsets, as given
    starts: torch.Tensor         # first row of each group
    counts: torch.Tensor         # tokens per group
    pad_starts: torch.Tensor     # first padded column of each group (a multiple of m)
    pad_counts: torch.Tensor     # ceil(count / m) * m
    pad_ends: torch.Tensor       # pad_starts + pad_counts (the wgrad GEMM's group offsets)
    tokens: int
    multiple: int
    bound: int

    @property
    def n_groups(self) -> int:
        return self.offs.shape[0]

    def row_groups(self) -> torch.Tensor:
        """Expert of every token row, int64 ``[T]``."""
        rows = torch.arange(self.tokens, device=self.offs.device)
        return torch.searchsorted(self.offs.to(torch.int64), rows, right=True)

    def col_groups(self) -> torch.Tensor:
        """Expert of every padded column, int64 ``[bound]`` (the tail past the last group is
        given to the last expert: it holds zeros, which change no amax)."""
        cols = torch.arange(self.bound, device=self.offs.device)
        g = torch.searchsorted(self.pad_ends, cols, right=True)
        return g.clamp(max=self.n_groups - 1)

    def padded_rows(self) -> torch.Tensor:
        """Padded position of every token row, int64 ``[T]``."""
        g = self.row_groups()
        return torch.arange(self.tokens, device=self.offs.device) - self.starts[g] + \
            self.pad_starts[g]

    def pad(self, x: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """``x [T, K]`` scattered into the zero matrix ``[bound, K]`` at the padded rows
        (``rows``: :meth:`padded_rows`, when the caller has it already)."""
        out = x.new_zeros((self.bound, x.shape[1]))
        return out.index_copy(0, self.padded_rows() if rows is None else rows, x)


def group_layout(offs: torch.Tensor, tokens: int, multiple: int) -> GroupLayout:
    """The layout of ``offs`` (int32/int64 group ends) for T tokens and token multiple m."""
    ends = offs.to(torch.int64)
    starts = torch.cat([ends.new_zeros(1), ends[:-1]])
    counts = ends - starts
    pad_counts = (counts + multiple - 1) // multiple * multiple
    pad_ends = torch.cumsum(pad_counts, 0)
    return GroupLayout(offs, starts, counts, pad_ends - pad_counts, pad_counts, pad_ends,
                       tokens, multiple, padded_bound(tokens, offs.shape[0], multiple))


def padded_bound(tokens: int, n_groups: int, multiple: int) -> int:
    """Static length of the padded column layout: ``T + E·(m-1)`` rounded up to a multiple of
    ``lcm(128, m)`` (at least one such multiple): whole 128-row tiles, so that the register
    pair kernels (MXFP8, FP8 1x128) take the padded matrix; the tail is zeros."""
    step = math.lcm(128, multiple)
    return max(step * math.ceil((tokens + n_groups * (multiple - 1)) / step), step)


# ============================================================================ SR stream
_M1, _M2, _GOLD = -4658895280553007687, -7723592293110705685, -7046029254386353131


def _mix64(h: torch.Tensor) -> torch.Tensor:
    """splitmix64's finalizer on int64 (wrapping products; logical shifts by masking)."""
    h = h ^ ((h >> 30) & ((1 << 34) - 1))
    h = h * _M1
    h = h ^ ((h >> 27) & ((1 << 37) - 1))
    h = h * _M2
    return h ^ ((h >> 31) & ((1 << 33) - 1))


def segment_rand_bits(seed: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """SR bytes: uint8 ``hash(seed, index)`` per element (broadcasting int64 tensors).

    ``seed`` is the expert's seed, ``index`` the element's row-major index inside the expert's
    own tensor, so an expert's bytes do not depend on where its tokens sit in the batch.
    """
    h = _mix64(seed.to(torch.int64) * _GOLD + index.to(torch.int64))
    return ((h >> 24) & 255).to(torch.uint8)


def _local_index(seg: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor, rows: int,
                 cols: int, along: str) -> torch.Tensor:
    """Row-major index of every element of ``[rows, cols]`` inside its segment's own tensor."""
    dev = seg.device
    if along == "rows":              # segment = a row range; its tensor is [len, cols]
        r = torch.arange(rows, device=dev) - starts[seg]
        return r[:, None] * cols + torch.arange(cols, device=dev)[None, :]
    c = torch.arange(cols, device=dev) - starts[seg]     # a column range: tensor [rows, len]
    return torch.arange(rows, device=dev)[:, None] * lengths[seg][None, :] + c[None, :]


def segment_sr_bytes(seg, starts, lengths, shape: tuple, along: str, seeds) -> torch.Tensor:
    """The SR bytes of a ``shape`` view split into segments (see :func:`quantize_segments`)."""
    if seeds is None:
        raise ValueError("stochastic rounding needs per-expert seeds")
    idx = _local_index(seg, starts, lengths, *shape, along)
    seed_b = seeds.reshape(-1)[seg]
    return segment_rand_bits(seed_b[:, None] if along == "rows" else seed_b[None, :], idx)


# ============================================================================ per-segment math
def segment_amax(a: torch.Tensor, seg: torch.Tensor, n_seg: int, along: str) -> torch.Tensor:
    """fp32 ``[n_seg]`` max of ``a`` (>= 0, NaN-free) over each segment's rows or columns."""
    part = a.amax(dim=1) if along == "rows" else a.amax(dim=0)
    out = torch.zeros(n_seg, dtype=torch.float32, device=a.device)
    if part.numel() == 0:
        return out
    return out.scatter_reduce(0, seg, part.float(), reduce="amax", include_self=True)


def _broadcast(per_seg: torch.Tensor, seg: torch.Tensor, along: str) -> torch.Tensor:
    v = per_seg[seg]
    return v[:, None] if along == "rows" else v[None, :]


def _nvfp4(x_hp, amax_b, bits):
    """quant.nvfp4's steps 2-5 with a per-row or per-column amax (1×16 blocks)."""
    rows, cols = x_hp.shape
    s_enc, s_dec = nvfp4_global_scales(amax_b)
    vmax = x_hp.abs().reshape(rows, cols // 16, 16).amax(dim=-1)
    s_enc6 = s_enc * _INV6
    if s_enc6.shape[-1] != 1:                       # per column: one value per 16-block
        s_enc6, s_dec = s_enc6[:, ::16], s_dec[:, ::16]
    s_b = torch.clamp(vmax * s_enc6, -448.0, 448.0)
    scale = fp8_cast_satfinite(s_b, torch.float8_e4m3fn)
    enc_b = torch.clamp(1.0 / (scale.float() * s_dec), max=FLT_MAX)
    y = torch.clamp(x_hp * enc_b.repeat_interleave(16, dim=1), -6.0, 6.0)
    codes = e2m1_encode(y) if bits is None else e2m1_stochastic_encode(y, bits)
    return codes, scale


def _quantize_nvfp4(x2, opts, seg, n_seg, along, bits):
    if opts.get("block_2d"):
        raise ValueError("grouped quantization of a token matrix takes 1x16 NVFP4 blocks, not "
                         "16x16 tiles (tiles would span tokens of two experts)")
    if opts.get("rht"):
        x2 = _rht(x2, int(opts.get("rht_d", 16)))
    x_hp, nan = split_nan(x2.float(), False)
    amax = segment_amax(x_hp.abs(), seg, n_seg, along)
    codes, scale = _nvfp4(x_hp, _broadcast(amax, seg, along), bits)
    if nan is not None:
        rows, cols = nan.shape
        scale = mark_nan(scale, nan.reshape(rows, cols // 16, 16).any(-1), NAN_BYTE_FP8)
    return pack_nibbles(codes), scale, amax


def _quantize_fp8_tensor(x2, opts, seg, n_seg, along, given_scale):
    fp8 = opts.get("fp8_dtype", torch.float8_e4m3fn)
    x_hp, nan = split_nan(x2.float(), False)
    amax = segment_amax(x_hp.abs(), seg, n_seg, along)
    scale = given_scale.float().reshape(n_seg) if given_scale is not None else \
        fp8_scale_from_amax(amax, fp8, opts.get("pow2_scales", False), x2.dtype)
    data = mark_nan(fp8_cast_satfinite(x_hp * _broadcast(scale, seg, along), fp8), nan,
                    NAN_BYTE_FP8)
    return data, 1.0 / scale, amax


def quantize_segments(x2: torch.Tensor, fmt: QFormat, opts: dict, seg: torch.Tensor,
                      starts: torch.Tensor, lengths: torch.Tensor, along: str,
                      seeds: torch.Tensor | None, scale: torch.Tensor | None, block_fn):
    """Quantize ``x2 [R, C]`` along C where the rows (``along="rows"``) or the columns
    (``"cols"``) are split into segments, each its own tensor: ``seg`` is the segment of every
    row/column, ``starts``/``lengths`` ``[n_seg]`` where each begins and how long it is.

    Returns ``(data, scale, amax [n_seg])``. NVFP4 and FP8 tensorwise compute their per-tensor
    quantity per segment here; formats whose scales are all per block (MX, FP8 blockwise) go
    through ``block_fn(x2, **opts)`` (the per-tensor ``quantize`` dispatch: the Triton kernel on
    CUDA) in one call, since their blocks never cross a segment; their amax is not used by any
    GEMM and is returned as zeros. ``seeds [n_seg]`` switch stochastic rounding on (bytes from
    :func:`segment_rand_bits`, or the given ``opts["rand_bits"]``).
    """
    n_seg = starts.shape[0]
    bits = opts.pop("rand_bits", None)
    if opts.get("stochastic") and bits is None:
        bits = segment_sr_bytes(seg, starts, lengths, tuple(x2.shape), along, seeds)
    if fmt == QFormat.NVFP4:
        return _quantize_nvfp4(x2, opts, seg, n_seg, along, bits)
    if fmt == QFormat.FP8_TENSOR:
        return _quantize_fp8_tensor(x2, opts, seg, n_seg, along, scale)
    if bits is not None:
        opts["rand_bits"] = bits
    q = block_fn(x2, **opts)
    return q.data, q.scale, torch.zeros(n_seg, dtype=torch.float32, device=x2.device)
