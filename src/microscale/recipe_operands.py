"""The configs a :class:`~microscale.recipe.Recipe` is made of: one operand, one GEMM.

:class:`OperandConfig` says how one GEMM operand is quantized (format, block, rounding, RHT,
scale options; ``format=None`` keeps it in high precision, :data:`HIGH_PRECISION`), always along
its GEMM's reduction dimension; :class:`GemmConfig` pairs the two operands of one GEMM
``A Bᵀ`` and checks that they agree on the RHT. Both validate on construction and round-trip
through ``to_dict`` / ``from_dict``; :mod:`microscale.recipe` has the per-layer recipe, the
presets and the JSON form.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum

import torch

from .quant.fp8 import MAX_MARGIN
from .tensor import QFormat
from .validate import FP8_BLOCKS, check_bool, check_int, check_rht_size, check_scale_rounding

__all__ = ["Rounding", "OperandConfig", "GemmConfig", "HIGH_PRECISION"]

_DEFAULT_BLOCK = {
    QFormat.NVFP4: (1, 16), QFormat.MXFP4: (1, 32), QFormat.MXFP8_E4M3: (1, 32),
    QFormat.MXFP8_E5M2: (1, 32), QFormat.FP8_BLOCK: (1, 128), QFormat.FP8_TENSOR: (0, 0),
}
_ALLOWED_BLOCKS = {
    QFormat.NVFP4: {(1, 16), (16, 16)}, QFormat.MXFP4: {(1, 32)}, QFormat.MXFP8_E4M3: {(1, 32)},
    QFormat.MXFP8_E5M2: {(1, 32)}, QFormat.FP8_BLOCK: set(FP8_BLOCKS),
    QFormat.FP8_TENSOR: {(0, 0)},
}
_FP8_DTYPES = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


class Rounding(str, Enum):
    RNE = "rne"
    STOCHASTIC = "stochastic"


@dataclass(frozen=True)
class OperandConfig:
    """How one GEMM operand is quantized (always along its GEMM's reduction dimension).

    ``block=None`` picks the format's default ((1,16) NVFP4, (1,32) MX, (1,128) FP8 block;
    tensorwise FP8 uses (0, 0) for "whole tensor"). ``rht`` is the RHT size (0 = off).
    ``fp8_dtype`` ("e4m3"/"e5m2") applies to the FP8 formats; ``delayed`` selects delayed
    scaling for tensorwise FP8.
    """

    format: QFormat | None = None
    block: tuple[int, int] | None = None
    rounding: Rounding = Rounding.RNE
    rht: int = 0
    scale_rounding: str = "ceil"
    pow2_scales: bool = True
    fp8_dtype: str = "e4m3"
    delayed: bool = False
    history_len: int = 1024          # delayed scaling: amax window (SPEC §8)
    margin: int = 0                  # delayed scaling: scale / 2^margin

    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        set_("rounding", _rounding(self.rounding))
        _check_field_kinds(self)
        if self.format is None:
            return
        set_("format", QFormat.parse(self.format))
        block = _DEFAULT_BLOCK[self.format] if self.block is None else _block(self.block)
        if block not in _ALLOWED_BLOCKS[self.format]:
            raise ValueError(f"block {block} is not valid for {self.format.value}; "
                             f"allowed: {sorted(_ALLOWED_BLOCKS[self.format])}")
        set_("block", block)
        if self.rht:
            check_rht_size(self.rht, "rht")
        if self.rht and self.format not in (QFormat.NVFP4, QFormat.MXFP4):
            raise ValueError(f"rht is supported on nvfp4/mxfp4 operands, not {self.format.value}")
        if self.rounding == Rounding.STOCHASTIC and self.format not in (QFormat.NVFP4, QFormat.MXFP4):
            raise ValueError(f"stochastic rounding is supported on FP4 formats, not {self.format.value}")
        check_scale_rounding(self.scale_rounding)
        if self.fp8_dtype not in _FP8_DTYPES:
            raise ValueError(f"fp8_dtype must be 'e4m3' or 'e5m2', got {self.fp8_dtype!r}")
        if self.delayed and self.format != QFormat.FP8_TENSOR:
            raise ValueError("delayed scaling applies to fp8_tensor operands only")

    @property
    def quantized(self) -> bool:
        return self.format is not None

    @property
    def block_size(self) -> int:
        """Elements per block along the reduction dim (what the reduction dim must divide by)."""
        return 1 if self.format in (None, QFormat.FP8_TENSOR) else self.block[1]

    @property
    def square_tiles(self) -> bool:
        """2D square tiles (NVFP4 16×16, FP8 128×128): the quantized transpose is exact."""
        return self.block is not None and self.block[0] == self.block[1] > 1

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["format"] = None if self.format is None else self.format.value
        d["rounding"] = self.rounding.value
        d["block"] = None if self.block is None else list(self.block)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "OperandConfig":
        d = _fields(cls, d, "OperandConfig", required=())
        if isinstance(d.get("block"), list):
            d["block"] = tuple(d["block"])
        return cls(**d)

    def quantize_kwargs(self) -> dict:
        """Options for :func:`microscale.quantize` (without generator/backend)."""
        f = self.format
        if f == QFormat.NVFP4:
            kw = {"block_2d": self.block == (16, 16), "rht": bool(self.rht),
                  "stochastic": self.rounding == Rounding.STOCHASTIC}
            return kw | ({"rht_d": self.rht} if self.rht else {})
        if f == QFormat.MXFP4:
            kw = {"scale_rounding": self.scale_rounding, "rht": bool(self.rht),
                  "stochastic": self.rounding == Rounding.STOCHASTIC}
            return kw | ({"rht_d": self.rht} if self.rht else {})
        if f in (QFormat.MXFP8_E4M3, QFormat.MXFP8_E5M2):
            return {"scale_rounding": self.scale_rounding}
        if f == QFormat.FP8_BLOCK:
            return {"block": self.block, "pow2_scales": self.pow2_scales,
                    "fp8_dtype": _FP8_DTYPES[self.fp8_dtype]}
        if f == QFormat.FP8_TENSOR:
            return {"fp8_dtype": _FP8_DTYPES[self.fp8_dtype], "pow2_scales": self.pow2_scales}
        raise ValueError("an unquantized operand has no quantize options")

    def __str__(self) -> str:
        if self.format is None:
            return "hp"
        parts = [self.format.value]
        if self.format == QFormat.FP8_TENSOR:
            parts.append(self.fp8_dtype + (" delayed" if self.delayed else ""))
        else:
            parts.append("x".join(map(str, self.block)))
        if self.format in (QFormat.FP8_BLOCK,):
            parts.append(self.fp8_dtype)
        if self.rounding == Rounding.STOCHASTIC:
            parts.append("SR")
        if self.rht:
            parts.append(f"RHT{self.rht}")
        if self.format in (QFormat.MXFP4, QFormat.MXFP8_E4M3, QFormat.MXFP8_E5M2) and \
                self.scale_rounding != "ceil":
            parts.append(self.scale_rounding)
        return " ".join(parts)


def _rounding(value) -> Rounding:
    try:
        return Rounding(value)
    except ValueError:
        raise ValueError(f"rounding must be 'rne' or 'stochastic', got {value!r}") from None


def _block(value) -> tuple[int, int]:
    if not isinstance(value, (tuple, list)) or len(value) != 2 or \
            not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise TypeError(f"block must be None or a (rows, cols) pair of ints, got {value!r}")
    return tuple(value)


def _check_field_kinds(op: OperandConfig) -> None:
    """Every field is of its declared kind (``rht=True`` is not a size; a history length of
    ``"1024"`` is not a number), whatever the format."""
    check_int(op.rht, "rht", 0, 128)
    check_bool(op.pow2_scales, "pow2_scales")
    check_bool(op.delayed, "delayed")
    check_int(op.history_len, "history_len", 1, 1 << 24)
    check_int(op.margin, "margin", 0, MAX_MARGIN)
    for name in ("scale_rounding", "fp8_dtype"):
        if not isinstance(getattr(op, name), str):
            raise TypeError(f"{name} must be a string, got {getattr(op, name)!r}")


HIGH_PRECISION = OperandConfig()


@dataclass(frozen=True)
class GemmConfig:
    """The two operands of one GEMM ``A Bᵀ``: ``a`` (x, dy or dyᵀ) and ``b`` (W, Wᵀ or xᵀ)."""

    a: OperandConfig = HIGH_PRECISION
    b: OperandConfig = HIGH_PRECISION

    def __post_init__(self):
        for name in ("a", "b"):
            if not isinstance(getattr(self, name), OperandConfig):
                raise TypeError(f"GemmConfig.{name} must be an OperandConfig, "
                                f"got {type(getattr(self, name)).__name__}")
        if self.quantized and self.a.rht != self.b.rht:
            raise ValueError(f"both operands of a GEMM need the same RHT size (a: {self.a.rht}, "
                             f"b: {self.b.rht}); a rotated operand only multiplies a rotated one")

    def to_dict(self) -> dict:
        return {"a": self.a.to_dict(), "b": self.b.to_dict()}

    @classmethod
    def from_dict(cls, d: dict) -> "GemmConfig":
        d = _fields(cls, d, "GemmConfig", required=("a", "b"))
        return cls(OperandConfig.from_dict(d["a"]), OperandConfig.from_dict(d["b"]))

    @property
    def quantized(self) -> bool:
        return self.a.quantized and self.b.quantized

    def __str__(self) -> str:
        return f"{self.a} × {self.b}" if self.quantized else "high precision"


def _fields(cls, d, what: str, required: tuple) -> dict:
    """``d`` as a dict of ``cls``'s fields, or a ValueError naming the missing/unknown key."""
    if not isinstance(d, dict):
        raise ValueError(f"{what}: expected a JSON object (dict), got {type(d).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - names)
    missing = [k for k in required if k not in d]
    if unknown or missing:
        raise ValueError(f"{what}: " + "; ".join(
            ([f"unknown key(s) {unknown}"] if unknown else []) +
            ([f"missing key(s) {missing}"] if missing else [])))
    return dict(d)
