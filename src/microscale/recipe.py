"""Recipes: which format, block, rounding and transform each GEMM operand of a linear layer uses.

A linear layer ``y = x Wᵀ`` (x ``[tokens, in]``, W ``[out, in]``, dy ``[tokens, out]``) runs three
GEMMs. Each is ``A Bᵀ`` with both operands quantized along the reduction dimension K::

    fprop   y  = x  Wᵀ     a = x    [tokens, in]     b = W    [out, in]      K = in
    dgrad   dx = dy W      a = dy   [tokens, out]    b = Wᵀ   [in, out]      K = out
    wgrad   dW = dyᵀ x     a = dyᵀ  [out, tokens]    b = xᵀ   [in, tokens]   K = tokens

A :class:`Recipe` holds one :class:`GemmConfig` per GEMM and each of those one
:class:`OperandConfig` per operand, so every operand of every GEMM has its own format, block,
rounding and RHT. ``format=None`` keeps an operand in high precision; a GEMM runs in high
precision (``compute_dtype``) when either operand is unquantized.

Presets (``Recipe.from_name``), in pseudo-math::

    bf16            all GEMMs in bf16
    fp8_tensorwise  x,W: E4M3 per tensor · dy: E5M2 per tensor (current scaling, "hybrid")
    fp8_delayed     as fp8_tensorwise, scales from a 1024-step amax history
    fp8_blockwise   x, dy: E4M3 1×128 · W: E4M3 128×128 · pow-2 scales (DeepSeek-V3)
    mxfp8           every operand MXFP8 E4M3, 1×32, ceil scales
    mxfp4           NVFP4 recipe on MXFP4: RHT 32 on wgrad, SR on dy, ceil scales
    nvfp4           SPEC §9: x 1×16 · W 16×16 · dy SR · RHT 16 on wgrad's dyᵀ and xᵀ
    nvfp4_no_sr     nvfp4 with RNE everywhere
    nvfp4_no_rht    nvfp4 without the wgrad RHT
    nvfp4_no_2d     nvfp4 with 1×16 weight blocks (W re-quantized along `out` for dgrad)
    nvfp4_base      1×16 RNE on every tensor, no RHT / SR / 2D

Overrides: ``dataclasses.replace(recipe, wgrad=...)``, :meth:`Recipe.with_operand` (one
operand), :meth:`Recipe.with_gemm` (both operands of one GEMM) or :meth:`Recipe.without_sr`
(every operand RNE). Both operands of a quantized GEMM must use the same RHT size (a rotated
operand only multiplies a rotated one), so the wgrad RHT is switched for both at once:
``r.with_gemm("wgrad", rht=0)`` (or the ``nvfp4_no_rht`` preset).

Serialization: :meth:`Recipe.to_json` / :meth:`Recipe.from_json` round-trip every field except
``meta``'s non-JSON values; layers store that string in their ``state_dict``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from enum import Enum

import torch

from .quant.fp8 import MAX_MARGIN
from .tensor import QFormat
from .validate import (FP8_BLOCKS, check_backend, check_bool, check_int, check_rht_size,
                       check_scale_rounding)

__all__ = ["Rounding", "OperandConfig", "GemmConfig", "Recipe", "PRESETS", "HIGH_PRECISION"]

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


_GEMMS = ("fprop", "dgrad", "wgrad")
_OPERANDS = {"fprop": ("x", "w"), "dgrad": ("dy", "w"), "wgrad": ("dy", "x")}
# (reduction dim K, rows of operand a, rows of operand b) per GEMM, in layer dimensions
_GEMM_DIMS = {"fprop": ("in", "tokens", "out"), "dgrad": ("out", "tokens", "in"),
              "wgrad": ("tokens", "out", "in")}
_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


@dataclass(frozen=True)
class Recipe:
    """Per-GEMM operand configs plus the precision of everything left unquantized."""

    name: str = "custom"
    fprop: GemmConfig = GemmConfig()
    dgrad: GemmConfig = GemmConfig()
    wgrad: GemmConfig = GemmConfig()
    compute_dtype: torch.dtype = torch.bfloat16
    backend: str = "auto"
    hp_last_fraction: float = 0.15   # default high-precision set for convert (paper: ~15%)
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self):
        for g in _GEMMS:
            if not isinstance(getattr(self, g), GemmConfig):
                raise TypeError(f"Recipe.{g} must be a GemmConfig, got {type(getattr(self, g)).__name__}")
        if self.compute_dtype not in (torch.bfloat16, torch.float16, torch.float32):
            raise ValueError(f"compute_dtype must be bf16, fp16 or fp32, got {self.compute_dtype}")
        check_backend(self.backend)
        if not isinstance(self.name, str):
            raise TypeError(f"Recipe.name must be a string, got {type(self.name).__name__}")
        if isinstance(self.hp_last_fraction, bool) or \
                not isinstance(self.hp_last_fraction, (int, float)):
            raise TypeError(f"hp_last_fraction must be a number, got {self.hp_last_fraction!r}")
        if not isinstance(self.meta, dict):
            raise TypeError(f"Recipe.meta must be a dict, got {type(self.meta).__name__}")
        if not 0.0 <= self.hp_last_fraction < 1.0:
            raise ValueError(f"hp_last_fraction must be in [0, 1), got {self.hp_last_fraction}")

    @property
    def gemms(self) -> dict[str, GemmConfig]:
        return {g: getattr(self, g) for g in _GEMMS}

    @property
    def quantized(self) -> bool:
        return any(g.quantized for g in self.gemms.values())

    def with_operand(self, gemm: str, operand: str, **changes) -> "Recipe":
        """Copy with one operand changed, e.g. ``r.with_operand("dgrad", "a", rounding="rne")``."""
        if gemm not in _GEMMS or operand not in ("a", "b"):
            raise ValueError(f"gemm must be one of {_GEMMS} and operand 'a' or 'b', "
                             f"got {gemm!r}, {operand!r}")
        g = getattr(self, gemm)
        op = dataclasses.replace(getattr(g, operand), **changes)
        return dataclasses.replace(self, **{gemm: dataclasses.replace(g, **{operand: op})})

    def with_gemm(self, gemm: str, **changes) -> "Recipe":
        """Copy with the same change on both operands of one GEMM: ``with_gemm("wgrad", rht=0)``."""
        if gemm not in _GEMMS:
            raise ValueError(f"gemm must be one of {_GEMMS}, got {gemm!r}")
        g = getattr(self, gemm)
        ops = {o: dataclasses.replace(getattr(g, o), **changes) for o in ("a", "b")}
        return dataclasses.replace(self, **{gemm: GemmConfig(**ops)})

    def without_sr(self) -> "Recipe":
        """Copy with round-to-nearest-even on every operand (deterministic: tests, ablations)."""
        out = self
        for g in _GEMMS:
            for o in ("a", "b"):
                if getattr(getattr(self, g), o).rounding != Rounding.RNE:
                    out = out.with_operand(g, o, rounding=Rounding.RNE)
        return out

    def required_multiples(self) -> dict[str, int]:
        """What the layer dims must divide by: ``{'in': .., 'out': .., 'tokens': ..}``.

        Each quantized operand needs its GEMM's reduction dim K divisible by its block (and by
        its RHT size); a 2D tile also needs the operand's rows divisible by the tile height.
        ``in`` and ``out`` are fixed by the layer; ``tokens`` is met by zero-padding.
        """
        need = {"in": 1, "out": 1, "tokens": 1}
        for g in _GEMMS:
            cfg = getattr(self, g)
            if not cfg.quantized:
                continue
            k_dim, a_rows, b_rows = _GEMM_DIMS[g]
            for op, rows_dim in ((cfg.a, a_rows), (cfg.b, b_rows)):
                need[k_dim] = math.lcm(need[k_dim], op.block_size, max(op.rht, 1))
                if op.block[0] > 1:   # 2D tiles also tile the operand's rows
                    need[rows_dim] = math.lcm(need[rows_dim], op.block[0])
        return need

    def op_keys(self) -> set[tuple[str, str]]:
        """The ``(op, key)`` pairs a layer's training step dispatches (``backend.explain``)."""
        from .backend import mm_key, rowcol_key

        def fmt(gemm: str, operand: str) -> str | None:
            cfg = getattr(self, gemm)
            return getattr(cfg, operand).format.value if cfg.quantized else None
        keys = set()
        for (g1, o1), (g2, o2) in ((("fprop", "a"), ("wgrad", "b")), (("fprop", "b"), ("dgrad", "b")),
                                   (("dgrad", "a"), ("wgrad", "a"))):
            if fmt(g1, o1) or fmt(g2, o2):
                keys.add(("quantize_rowcol", rowcol_key(fmt(g1, o1), fmt(g2, o2))))
        for g in _GEMMS:
            if getattr(self, g).quantized:
                keys.add(("scaled_mm", mm_key(fmt(g, "a"), fmt(g, "b"))))
                if fmt(g, "a") in ("nvfp4", "mxfp4"):   # A may be expanded after quantizing
                    keys.add(("expand", fmt(g, "a")))
        return keys

    @classmethod
    def from_name(cls, name: str, **overrides) -> "Recipe":
        if name not in PRESETS:
            raise ValueError(f"unknown recipe {name!r}; presets: {', '.join(PRESETS)}")
        return dataclasses.replace(PRESETS[name](), **overrides) if overrides else PRESETS[name]()

    @classmethod
    def parse(cls, recipe: "str | Recipe") -> "Recipe":
        """A preset name or a Recipe -> Recipe (what layers and ``convert`` accept)."""
        if isinstance(recipe, Recipe):
            return recipe
        if isinstance(recipe, str):
            return cls.from_name(recipe)
        raise TypeError(f"recipe must be a preset name or a microscale.Recipe, "
                        f"got {type(recipe).__name__}")

    # ------------------------------------------------------------------ serialization
    def to_dict(self) -> dict:
        d = {"name": self.name, **{g: getattr(self, g).to_dict() for g in _GEMMS},
             "compute_dtype": str(self.compute_dtype).replace("torch.", ""),
             "backend": self.backend, "hp_last_fraction": self.hp_last_fraction}
        meta = {k: v for k, v in self.meta.items() if _is_json(v)}
        return d | ({"meta": meta} if meta else {})

    @classmethod
    def from_dict(cls, d: dict) -> "Recipe":
        d = _fields(cls, d, "Recipe", required=_GEMMS + ("compute_dtype",))
        for g in _GEMMS:
            d[g] = GemmConfig.from_dict(d[g])
        if d.get("compute_dtype") not in _DTYPES:
            raise ValueError(f"compute_dtype must be one of {list(_DTYPES)}, "
                             f"got {d.get('compute_dtype')!r}")
        d["compute_dtype"] = _DTYPES[d["compute_dtype"]]
        return cls(**d)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Recipe":
        """Inverse of :meth:`to_json`; malformed text is a ValueError that says what is wrong."""
        if not isinstance(text, (str, bytes)):
            raise TypeError(f"Recipe.from_json expects a JSON string, got {type(text).__name__}")
        try:
            d = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"Recipe.from_json: not valid JSON ({err})") from None
        return cls.from_dict(d)

    def __str__(self) -> str:
        lines = [f"Recipe {self.name!r} (compute {str(self.compute_dtype).replace('torch.', '')}, "
                 f"backend {self.backend}, last {self.hp_last_fraction:.0%} of blocks high precision)"]
        for g in _GEMMS:
            cfg, (na, nb) = getattr(self, g), _OPERANDS[g]
            if g == "wgrad":
                na, nb = "dyᵀ", "xᵀ"
            body = f"{na}: {cfg.a} · {nb}: {cfg.b}" if cfg.quantized else "high precision"
            lines.append(f"  {g:<6} {body}")
        return "\n".join(lines)


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


def _is_json(v) -> bool:
    try:
        json.dumps(v)
    except (TypeError, ValueError):
        return False
    return True


# ----------------------------------------------------------------------------- presets
def _same(op: OperandConfig) -> GemmConfig:
    return GemmConfig(op, op)


def _bf16() -> Recipe:
    return Recipe("bf16", hp_last_fraction=0.0)


def _fp8_tensorwise(delayed: bool = False) -> Recipe:
    e4 = OperandConfig(QFormat.FP8_TENSOR, fp8_dtype="e4m3", pow2_scales=False, delayed=delayed)
    e5 = dataclasses.replace(e4, fp8_dtype="e5m2")
    name = "fp8_delayed" if delayed else "fp8_tensorwise"
    return Recipe(name, GemmConfig(e4, e4), GemmConfig(e5, e4), GemmConfig(e5, e4),
                  hp_last_fraction=0.0)


def _fp8_blockwise() -> Recipe:
    act = OperandConfig(QFormat.FP8_BLOCK, (1, 128))
    wt = OperandConfig(QFormat.FP8_BLOCK, (128, 128))
    return Recipe("fp8_blockwise", GemmConfig(act, wt), GemmConfig(act, wt), _same(act),
                  hp_last_fraction=0.0)


def _mxfp8() -> Recipe:
    return Recipe("mxfp8", *([_same(OperandConfig(QFormat.MXFP8_E4M3))] * 3), hp_last_fraction=0.0)


def _nvfp4(sr: bool = True, rht: int = 16, two_d: bool = True, name: str = "nvfp4") -> Recipe:
    sr_mode = Rounding.STOCHASTIC if sr else Rounding.RNE
    x = OperandConfig(QFormat.NVFP4, (1, 16))
    w = OperandConfig(QFormat.NVFP4, (16, 16) if two_d else (1, 16))
    dy = OperandConfig(QFormat.NVFP4, (1, 16), rounding=sr_mode)
    return Recipe(name, GemmConfig(x, w), GemmConfig(dy, w),
                  GemmConfig(dataclasses.replace(dy, rht=rht), dataclasses.replace(x, rht=rht)))


def _mxfp4() -> Recipe:
    x = OperandConfig(QFormat.MXFP4)
    dy = OperandConfig(QFormat.MXFP4, rounding=Rounding.STOCHASTIC)
    return Recipe("mxfp4", GemmConfig(x, x), GemmConfig(dy, x),
                  GemmConfig(dataclasses.replace(dy, rht=32), dataclasses.replace(x, rht=32)))


def _nvfp4_base() -> Recipe:
    op = OperandConfig(QFormat.NVFP4, (1, 16))
    return Recipe("nvfp4_base", *([_same(op)] * 3))


PRESETS = {
    "bf16": _bf16,
    "fp8_tensorwise": _fp8_tensorwise,
    "fp8_delayed": lambda: _fp8_tensorwise(delayed=True),
    "fp8_blockwise": _fp8_blockwise,
    "mxfp8": _mxfp8,
    "mxfp4": _mxfp4,
    "nvfp4": _nvfp4,
    "nvfp4_no_sr": lambda: _nvfp4(sr=False, name="nvfp4_no_sr"),
    "nvfp4_no_rht": lambda: _nvfp4(rht=0, name="nvfp4_no_rht"),
    "nvfp4_no_2d": lambda: _nvfp4(two_d=False, name="nvfp4_no_2d"),
    "nvfp4_base": _nvfp4_base,
}
