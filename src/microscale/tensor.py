"""QuantizedTensor: the container every quantizer returns and every GEMM consumes.

A quantized tensor is always quantized along its **last** dimension (the GEMM reduction
dimension); leading dimensions are flattened to ``rows``. Layouts, for ``x`` of shape
``[..., cols]`` flattened to ``[rows, cols]``:

=============== =============================== ===================================== ===============
format          ``data``                        ``scale``                             ``amax``
=============== =============================== ===================================== ===============
nvfp4           uint8 ``[rows, cols/2]``        float8_e4m3fn ``[rows, cols/16]``     fp32 0-dim
                (two E2M1 codes per byte)       (2D: each 16×16 tile's byte on its
                                                16 rows)
mxfp8_e4m3/e5m2 float8 ``[rows, cols]``         uint8 UE8M0 ``[rows, cols/32]``       fp32 0-dim
mxfp4           uint8 ``[rows, cols/2]``        uint8 UE8M0 ``[rows, cols/32]``       fp32 0-dim
fp8_block       float8_e4m3fn ``[rows, cols]``  fp32 scale_inv ``[rows/br, cols/bc]`` fp32 0-dim
fp8_tensor      float8 ``[rows, cols]``         fp32 0-dim scale_inv                  fp32 0-dim
=============== =============================== ===================================== ===============

``dequantize()`` returns the original shape and saturates: a decoded value beyond the
requested dtype's largest finite value (an MX or FP8 block whose top element rounded into the
next binade, ``256 · 2^8 = 65536`` for fp16) becomes ±max, never ±Inf; a stored NaN (only
from NaN input under ``check_finite=False``) stays NaN.

For NVFP4 with the RHT on, the stored values live in the rotated domain; ``dequantize()``
rotates back by default (the RHT is orthogonal, so this approximates ``x``), and
``dequantize(undo_rht=False)`` returns the rotated values.

``partial_dequantize()`` is what GEMMs consume: the values times their *block* scales only,
as a fp32 ``[rows, cols]`` matrix, plus the per-tensor factor left to apply in the epilogue
(NVFP4's ``S_dec``; 1 for the other formats). For NVFP4 each ``value * scale`` is exact in bf16.

Expanded operands (``expanded=True``, NVFP4 / MXFP4 / MXFP8 only): ``data`` holds exactly those
``value · block_scale`` products as bf16 ``[rows, cols]`` instead of the codes, with ``scale``
and ``amax`` as usual. On GPUs without FP4/MX tensor cores the GEMM decodes its operands to
that form anyway (``kernels/gemm_fp4``: dequantize + cuBLAS bf16); a quantizer that writes it
directly saves the packed round trip for operands consumed at once (the layer asks for it,
``kernels/gemm_paths.takes_expanded``). Exact wherever a product is a bf16 number: always for
NVFP4 (≥ 2^-10), and for MX unless the block scale is below ~2^-118 (bf16 subnormals), the
dequantize path's own limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

import torch

from .formats import e2m1_decode, e8m0_decode, unpack_fp4
from .validate import check_bool, check_float_dtype

__all__ = ["QFormat", "QuantizedTensor", "transpose_tile_scales"]


def transpose_tile_scales(scale: torch.Tensor, tile: int,
                          out: torch.Tensor | None = None) -> torch.Tensor:
    """The scale bytes of the transposed tensor for square ``tile``-tiled scales stored one per
    row and block (``[..., rows, cols/tile]``, each tile's byte on its ``tile`` rows, SPEC §3):
    ``[..., cols, rows/tile]``, over the last two dims (stacked experts too); written into
    ``out`` (contiguous, that shape) where given."""
    tiles_t = scale[..., ::tile, :].transpose(-1, -2)               # [..., cols/t, rows/t]
    *lead, ct, rt = tiles_t.shape           # each row of tiles_t on `tile` rows, in one copy
    rows_t = tiles_t.unsqueeze(-2).expand(*lead, ct, tile, rt)
    if out is not None:
        out.view(*lead, ct, tile, rt).copy_(rows_t)
        return out
    return rows_t.reshape(*lead, ct * tile, rt).contiguous()


class QFormat(str, Enum):
    NVFP4 = "nvfp4"
    MXFP8_E4M3 = "mxfp8_e4m3"
    MXFP8_E5M2 = "mxfp8_e5m2"
    MXFP4 = "mxfp4"
    FP8_BLOCK = "fp8_block"
    FP8_TENSOR = "fp8_tensor"

    @classmethod
    def parse(cls, fmt: "str | QFormat") -> "QFormat":
        try:
            return cls(fmt)
        except ValueError:
            names = ", ".join(repr(f.value) for f in cls)
            raise ValueError(f"unknown format {fmt!r}; expected one of {names}") from None

    @property
    def is_fp4(self) -> bool:
        return self in (QFormat.NVFP4, QFormat.MXFP4)

    @property
    def is_mx8(self) -> bool:
        """MXFP8, either element type (E4M3 or E5M2 codes, UE8M0 scales per 32)."""
        return self in (QFormat.MXFP8_E4M3, QFormat.MXFP8_E5M2)

    @property
    def expandable(self) -> bool:
        """Whether a view can be held expanded (bf16 ``value · block_scale``, see above)."""
        return self in (QFormat.NVFP4, QFormat.MXFP4, QFormat.MXFP8_E4M3, QFormat.MXFP8_E5M2)


@dataclass(frozen=True)
class QuantizedTensor:
    """Codes + scales + metadata. Immutable; build new ones with :func:`dataclasses.replace`."""

    fmt: QFormat
    data: torch.Tensor
    scale: torch.Tensor
    amax: torch.Tensor
    shape: torch.Size                 # original (unflattened) shape
    orig_dtype: torch.dtype
    block: tuple[int, int]            # (rows, cols) covered by one scale
    rht_d: int = 0                    # RHT size applied before quantizing (0 = none)
    extra: dict = field(default_factory=dict, compare=False)
    expanded: bool = False            # data: bf16 value·block_scale [rows, cols], not codes

    # ----------------------------------------------------------------- shape helpers
    @property
    def rows(self) -> int:
        return self.data.shape[0]

    @property
    def cols(self) -> int:
        return self.shape[-1] if len(self.shape) else 1

    @property
    def device(self) -> torch.device:
        return self.data.device

    def nbytes(self) -> int:
        """Bytes held by codes, scales and amax (what a saved activation costs)."""
        return sum(t.numel() * t.element_size() for t in (self.data, self.scale, self.amax))

    # ----------------------------------------------------------------- dequantize
    def values(self) -> torch.Tensor:
        """Element values as fp32 ``[rows, cols]``, before any scale."""
        if self.expanded:
            raise ValueError("an expanded operand keeps value·block_scale, not the element "
                             "values; use partial_dequantize() or dequantize()")
        if self.fmt.is_fp4:
            return e2m1_decode(unpack_fp4(self.data))
        return self.data.float()

    def block_scales(self) -> torch.Tensor:
        """The block scales expanded to fp32 ``[rows, cols]``."""
        if self.fmt == QFormat.FP8_TENSOR:
            return self.scale.float().expand(self.rows, self.cols)
        if self.fmt == QFormat.NVFP4:
            s = self.scale.float()
        elif self.fmt == QFormat.FP8_BLOCK:
            s = self.scale.repeat_interleave(self.block[0], dim=0)
        else:  # MX: UE8M0 bytes
            s = e8m0_decode(self.scale)
        return s.repeat_interleave(self.block[1], dim=1)

    def tensor_scale(self) -> torch.Tensor:
        """Per-tensor decode factor applied after the block scales (NVFP4's S_dec, else 1)."""
        if self.fmt == QFormat.NVFP4:
            from .quant.nvfp4 import nvfp4_global_scales
            return nvfp4_global_scales(self.amax)[1]
        return torch.ones((), dtype=torch.float32, device=self.device)

    def block_values(self) -> torch.Tensor:
        """``values * block_scales`` as fp32 ``[rows, cols]`` (an expanded operand's data)."""
        if self.expanded:
            return self.data.float()
        return self.values() * self.block_scales()

    def partial_dequantize(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(values * block_scales as fp32 [rows, cols], per-tensor factor)``."""
        return self.block_values(), self.tensor_scale()

    def expand(self) -> "QuantizedTensor":
        """The expanded form (see the module docstring): bf16 ``value · block_scale`` as data."""
        if self.expanded:
            return self
        if not self.fmt.expandable:
            raise ValueError(f"expand() is for NVFP4 / MXFP4 / MXFP8 operands, not "
                             f"{self.fmt.value}")
        return replace(self, data=self.block_values().to(torch.bfloat16), expanded=True)

    def dequantize(self, dtype: torch.dtype = torch.float32, undo_rht: bool = True) -> torch.Tensor:
        """Decode to ``dtype`` in the original shape (inverse-rotating RHT data by default)."""
        check_float_dtype(dtype, "dtype")
        check_bool(undo_rht, "undo_rht")
        part, s_dec = self.partial_dequantize()
        x = part * s_dec
        if self.rht_d and undo_rht:
            from .hadamard import rht_inverse
            x = rht_inverse(x, self.rht_d)
        top = min(torch.finfo(dtype).max, torch.finfo(torch.float32).max)
        return x.clamp(-top, top).reshape(self.shape).to(dtype)     # satfinite; NaN stays

    # ----------------------------------------------------------------- transpose
    def t(self, scale_t: torch.Tensor | None = None) -> "QuantizedTensor":
        """Exact transpose for square-tiled formats (NVFP4 16×16, FP8 128×128).

        SPEC §3/§8: a 2D-tiled tensor's quantized transpose is the transpose of its codes and
        its tile scales, so dgrad can reuse fprop's weight without re-quantizing. Only 2-D.
        An expanded NVFP4 operand's data comes back as a transposed *view* (no copy; the GEMMs
        read it in place), its scales transposed like the codes'. ``scale_t`` (NVFP4): those
        transposed scale bytes where a kernel already wrote them (``ops_many``'s weights).
        """
        if len(self.shape) != 2 or self.block[0] != self.block[1] or self.block[0] == 1:
            raise ValueError(f"t() needs a 2-D tensor with square 2D tiles, got shape "
                             f"{tuple(self.shape)} block {self.block}; re-quantize the "
                             "transpose instead")
        if self.rht_d:  # the rotation runs along the old last dim, not the new one
            raise ValueError(f"t() of an RHT-rotated tensor (rht_d={self.rht_d}) is not a "
                             "quantized transpose; re-quantize the transpose instead")
        rows, cols = self.shape
        if self.fmt == QFormat.NVFP4:
            from .formats import pack_nibbles
            scale = transpose_tile_scales(self.scale, self.block[0]) if scale_t is None \
                else scale_t
            data = self.data.t() if self.expanded else \
                pack_nibbles(unpack_fp4(self.data).t().contiguous())
        elif scale_t is not None:
            raise ValueError(f"t(scale_t=...) is for NVFP4 tiles, not {self.fmt.value}")
        elif self.fmt == QFormat.FP8_BLOCK:
            data, scale = self.data.t().contiguous(), self.scale.t().contiguous()
        else:
            raise ValueError(f"t() is not defined for {self.fmt.value}")
        return replace(self, data=data, scale=scale, shape=torch.Size((cols, rows)))

    def __repr__(self) -> str:
        return (f"QuantizedTensor(fmt={self.fmt.value}, shape={tuple(self.shape)}, "
                f"block={self.block}, rht_d={self.rht_d}, data={self.data.dtype}"
                f"{tuple(self.data.shape)}, scale={self.scale.dtype}{tuple(self.scale.shape)}, "
                f"{'expanded, ' if self.expanded else ''}device={self.device})")
