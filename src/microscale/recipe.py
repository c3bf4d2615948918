"""Recipes: which format, block, rounding and transform each GEMM operand of a linear layer uses.

A linear layer ``y = x Wᵀ`` (x ``[tokens, in]``, W ``[out, in]``, dy ``[tokens, out]``) runs three
GEMMs. Each is ``A Bᵀ`` with both operands quantized along the reduction dimension K::

    fprop   y  = x  Wᵀ     a = x    [tokens, in]     b = W    [out, in]      K = in
    dgrad   dx = dy W      a = dy   [tokens, out]    b = Wᵀ   [in, out]      K = out
    wgrad   dW = dyᵀ x     a = dyᵀ  [out, tokens]    b = xᵀ   [in, tokens]   K = tokens

A :class:`Recipe` holds one :class:`GemmConfig` per GEMM and each of those one
:class:`OperandConfig` per operand, so every operand of every GEMM has its own format, block,
rounding and RHT. ``format=None`` keeps an operand in high precision; a GEMM runs in high
precision (``compute_dtype``) when either operand is unquantized. Those two configs (and
:class:`Rounding`, :data:`HIGH_PRECISION`) live in :mod:`microscale.recipe_operands`; this module
re-exports them and holds :class:`Recipe`, its presets and its JSON form.

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

import torch

# the operand and GEMM configs (private names re-exported too: every old import path works)
from .recipe_operands import (  # noqa: F401
    _ALLOWED_BLOCKS,
    _DEFAULT_BLOCK,
    _FP8_DTYPES,
    HIGH_PRECISION,
    GemmConfig,
    OperandConfig,
    Rounding,
    _block,
    _check_field_kinds,
    _fields,
    _rounding,
)
from .tensor import QFormat
from .validate import check_backend

__all__ = ["Rounding", "OperandConfig", "GemmConfig", "Recipe", "PRESETS", "HIGH_PRECISION"]

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

    def _format_of(self, gemm: str, operand: str) -> str | None:
        """The format name of ``gemm``'s operand ``a`` or ``b``; None where it is unquantized."""
        cfg = getattr(self, gemm)
        return getattr(cfg, operand).format.value if cfg.quantized else None

    def op_keys(self) -> set[tuple[str, str]]:
        """The ``(op, key)`` pairs a layer's training step dispatches (``backend.explain``)."""
        from .backend import mm_key, rowcol_key
        fmt = self._format_of
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

    def weight_cache_keys(self) -> set[tuple[str, str]]:
        """The ``quantize_rowcol_many`` keys :func:`microscale.weight_cache` may dispatch for
        a layer's W and Wᵀ, all the model's weights in one call (``ops_many``): both views, or
        W's alone for NVFP4 16×16 weights (their Wᵀ is W's transpose). Not in
        :meth:`op_keys`: a step runs them only inside the cache."""
        from .backend import rowcol_key
        w, w_t = self._format_of("fprop", "b"), self._format_of("dgrad", "b")
        if w is None and w_t is None:
            return set()
        return {("quantize_rowcol_many", rowcol_key(w, None if w == "nvfp4" else w_t))}

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
