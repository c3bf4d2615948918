"""Argument validation at the public boundary: one checker per concept.

A wrong argument must fail before any arithmetic runs, with an error that names it:
``TypeError`` when the argument is of the wrong kind (``rht=32``, ``generator=42``, an integer
``out_dtype``), ``ValueError`` when it is of the right kind with a wrong value (``rht_d=24``,
``scale_rounding="round"``, a tensor on another device). Without this, Python's duck typing
turns mistakes into different requests: ``rht=32`` is truthy and used to run a 16-point RHT.

Everything here reads Python values and tensor *metadata* only (type, dtype, shape, device),
never a tensor's values. So it costs no host synchronisation and runs unchanged while
``torch.compile`` traces a call. Checks that read values (NaN/Inf in ``x``, the value of a
given ``amax`` or ``scale``) live with the arithmetic in :mod:`microscale.quant.common`, and
``check_finite=False`` skips them.

One function per concept, used everywhere that concept is checked:

======================== ====================================================================
``check_bool``           a real ``bool`` (``numpy.bool_`` too); never an int, string or None
``check_rht_size``       ``d`` a power of two in [2, 128] (``hadamard``, recipes, quantize)
``check_fp8_dtype``      ``torch.float8_e4m3fn`` or ``torch.float8_e5m2``
``check_float_dtype``    a floating ``torch.dtype`` for an output (``out_dtype``, dequantize)
``check_backend``        ``"auto"``, ``"reference"`` or ``"triton"``
``check_scale_rounding`` ``"ceil"`` or ``"floor"`` (MX scales; quantize and recipes)
``check_generator``      None or a ``torch.Generator`` on x's device type
``check_input_meta``     x: a float32/bfloat16/float16 tensor, non-empty, blocks divide it
``check_quantize_options`` the per-format option table of ``ms.quantize``
======================== ====================================================================

Meta tensors carry no values; ``ms.quantize`` of a meta tensor returns a ``QuantizedTensor``
of meta tensors with the right shapes and dtypes (shape inference, e.g. for a model built on
``device="meta"``), after the same metadata checks.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["SUPPORTED_DTYPES", "FP8_DTYPES", "OUT_DTYPES", "check_bool", "check_rht_size",
           "check_fp8_dtype", "check_float_dtype", "check_backend", "check_generator",
           "check_int", "check_input_meta", "check_rand_bits", "check_quantize_options",
           "check_scale_rounding", "quantize_blocks", "FP8_BLOCKS", "SCALE_ROUNDINGS"]

SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)
OUT_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
BACKENDS = ("auto", "reference", "triton")


def _kind(value) -> str:
    return type(value).__name__


# ============================================================================ scalars
def check_bool(value, name: str) -> bool:
    """``value`` must be a bool (``rht=32`` or ``rht="yes"`` is a TypeError, not ``True``)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool (True/False), got {_kind(value)} {value!r}")
    return bool(value)


def check_int(value, name: str, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` must be an int (not a bool or float) in ``[lo, hi]``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {_kind(value)} {value!r}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        want = f">= {lo}" if hi is None else f"<= {hi}" if lo is None else f"in [{lo}, {hi}]"
        raise ValueError(f"{name} must be {want}, got {value}")
    return int(value)


def check_rht_size(d, name: str = "rht_d") -> int:
    """The RHT size: a power of two in [2, 128] (SPEC §4)."""
    d = check_int(d, name)
    if d < 2 or d > 128 or d & (d - 1):
        raise ValueError(f"{name}: RHT size d must be a power of two in [2, 128], got {d!r}")
    return d


def check_fp8_dtype(dtype, name: str = "fp8_dtype") -> torch.dtype:
    if dtype not in FP8_DTYPES:
        raise TypeError(f"{name} must be torch.float8_e4m3fn or torch.float8_e5m2, got {dtype!r}")
    return dtype


def check_float_dtype(dtype, name: str, allowed=OUT_DTYPES) -> torch.dtype:
    """An output dtype: a floating ``torch.dtype`` from ``allowed`` (an int dtype is rejected:
    casting a dequantized tensor to int32 silently truncates it)."""
    if not isinstance(dtype, torch.dtype) or dtype not in allowed:
        names = ", ".join(str(d).replace("torch.", "") for d in allowed)
        raise TypeError(f"{name} must be one of torch.{{{names}}}, got {dtype!r}")
    return dtype


def check_backend(backend) -> str:
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a string, one of {BACKENDS}, got {_kind(backend)}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    return backend


def check_generator(generator, device: torch.device | None = None):
    """None or a ``torch.Generator`` whose device type is ``device``'s."""
    if generator is None:
        return None
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {_kind(generator)}")
    if device is not None and device.type != "meta" and \
            generator.device.type != torch.device(device).type:
        raise ValueError(f"generator is on {generator.device} but the tensor is on {device}")
    return generator


# ============================================================================ tensors
def _tensor(value, name: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {_kind(value)}")
    return value


def check_input_meta(x, fmt: str, block_cols: int = 1, block_rows: int = 1) -> torch.Tensor:
    """x's metadata: a float32/bfloat16/float16 tensor, at least 1-D, non-empty, its last
    dimension a multiple of ``block_cols`` and its row count (leading dims flattened) of
    ``block_rows``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{fmt}: expected a torch.Tensor, got {_kind(x)}")
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{fmt}: input dtype must be float32, bfloat16 or float16, got {x.dtype}")
    if x.dim() == 0:
        raise ValueError(f"{fmt}: cannot quantize a 0-dim tensor (need at least [cols])")
    if x.numel() == 0:
        raise ValueError(f"{fmt}: cannot quantize an empty tensor of shape {tuple(x.shape)}")
    cols = x.shape[-1]
    if cols % block_cols:
        raise ValueError(f"{fmt}: last dimension {cols} is not divisible by the block size "
                         f"{block_cols}; pad it to a multiple of {block_cols}")
    rows = x.numel() // cols
    if rows % block_rows:
        raise ValueError(f"{fmt}: {block_rows}x{block_cols} tiles need the row count "
                         f"(leading dims flattened: {rows}) divisible by {block_rows}")
    return x


def check_rand_bits(bits, numel: int, device: torch.device) -> torch.Tensor:
    """Caller-given SR bytes: a uint8 tensor with one byte per element of x, on x's device."""
    if (not isinstance(bits, torch.Tensor) or bits.dtype != torch.uint8
            or bits.numel() != numel or bits.device != device):
        got = (f"{bits.dtype} {tuple(bits.shape)} on {bits.device}"
               if isinstance(bits, torch.Tensor) else _kind(bits))
        raise ValueError(f"rand_bits must be a uint8 tensor with one byte per element of x "
                         f"({numel} on {device}), got {got}")
    return bits


def _check_scalar_tensor(value, name: str, device: torch.device) -> torch.Tensor:
    """A given ``amax`` or ``scale``: one floating-point element on x's device."""
    t = _tensor(value, name)
    if not t.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {t.dtype}")
    if t.numel() != 1:
        raise ValueError(f"{name} must hold one value, got shape {tuple(t.shape)}")
    if t.device != device:
        raise ValueError(f"{name} is on {t.device} but x is on {device}")
    return t


def _check_seed(value, name: str, device: torch.device) -> torch.Tensor:
    t = _tensor(value, name)
    if t.dtype not in (torch.int32, torch.int64) or t.numel() < 1:
        raise TypeError(f"{name} must be an int32/int64 tensor with at least one element "
                        f"(see quant.common.draw_seed), got {t.dtype} {tuple(t.shape)}")
    return t


# ============================================================================ quantize options
# The options each format takes (anything else is a TypeError naming it: a typo never silently
# does nothing), and one checker per option: (value, name, device) -> normalised value.
COMMON_OPTIONS = frozenset({"check_finite"})
# (keyed by format name: QFormat is a str Enum, so QFormat.NVFP4 finds "nvfp4"; no import of
# tensor.py here keeps this module importable from formats.py and hadamard.py)
FORMAT_OPTIONS = {
    "nvfp4": frozenset({"block_2d", "rht", "rht_d", "stochastic", "generator", "seed", "amax",
                        "rand_bits"}),
    "mxfp8_e4m3": frozenset({"scale_rounding"}),
    "mxfp8_e5m2": frozenset({"scale_rounding"}),
    "mxfp4": frozenset({"scale_rounding", "rht", "rht_d", "stochastic", "generator", "seed",
                        "rand_bits"}),
    "fp8_block": frozenset({"block", "pow2_scales", "fp8_dtype"}),
    "fp8_tensor": frozenset({"fp8_dtype", "pow2_scales", "scale", "amax"}),
}
FP8_BLOCKS = ((1, 128), (128, 128))
SCALE_ROUNDINGS = ("ceil", "floor")
_SR_SOURCES = ("generator", "seed", "rand_bits")


def check_scale_rounding(value, name: str = "scale_rounding", device=None) -> str:
    """MX scale rounding: ``"ceil"`` or ``"floor"`` (SPEC §7)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be 'ceil' or 'floor', got {_kind(value)}")
    if value not in SCALE_ROUNDINGS:
        raise ValueError(f"{name} must be 'ceil' or 'floor', got {value!r}")
    return value


def _fp8_block(value, name, device):
    if not isinstance(value, (tuple, list)) or len(value) != 2 or \
            not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
        raise TypeError(f"{name} must be a (rows, cols) tuple of ints, got {value!r}")
    block = (int(value[0]), int(value[1]))
    if block not in FP8_BLOCKS:
        raise ValueError(f"fp8_block supports {name}=(1, 128) or (128, 128), got {block}")
    return block


_CHECKS = {
    "check_finite": lambda v, n, d: check_bool(v, n),
    "block_2d": lambda v, n, d: check_bool(v, n),
    "rht": lambda v, n, d: check_bool(v, n),
    "stochastic": lambda v, n, d: check_bool(v, n),
    "pow2_scales": lambda v, n, d: check_bool(v, n),
    "rht_d": lambda v, n, d: check_rht_size(v, n),
    "fp8_dtype": lambda v, n, d: check_fp8_dtype(v, n),
    "scale_rounding": check_scale_rounding,
    "block": _fp8_block,
    "generator": lambda v, n, d: check_generator(v, d),
    "seed": lambda v, n, d: None if v is None else _check_seed(v, n, d),
    "rand_bits": lambda v, n, d: None if v is None else _tensor(v, n),
    "amax": lambda v, n, d: None if v is None else _check_scalar_tensor(v, n, d),
    "scale": lambda v, n, d: None if v is None else _check_scalar_tensor(v, n, d),
}


def quantize_blocks(fmt: str, opts: dict) -> tuple[int, int]:
    """``(block_cols, block_rows)`` that x's last dim and row count must divide by."""
    if fmt == "nvfp4":
        return 16, 16 if opts.get("block_2d") else 1
    if fmt == "fp8_block":
        rows, cols = opts.get("block", (1, 128))
        return cols, rows
    if fmt == "fp8_tensor":
        return 1, 1
    return 32, 1


def check_quantize_options(fmt, options: dict, xv: torch.Tensor,
                           where: str = "quantize") -> dict:
    """Validate every option of one quantized view of ``xv`` (x, or xᵀ for a column view) and
    their combinations; return them normalised (e.g. ``block`` as a tuple). ``fmt`` is a
    parsed :class:`~microscale.tensor.QFormat`."""
    unknown = set(options) - FORMAT_OPTIONS[fmt] - COMMON_OPTIONS
    if unknown:
        allowed = ", ".join(sorted(FORMAT_OPTIONS[fmt] | COMMON_OPTIONS))
        raise TypeError(f"{where}({fmt.value!r}) got unexpected option(s) "
                        f"{', '.join(sorted(unknown))}; it accepts: {allowed}")
    opts = {k: _CHECKS[k](v, k, xv.device) for k, v in options.items()}
    if "rht_d" in opts and not opts.get("rht", False):
        raise ValueError(f"rht_d={opts['rht_d']} needs rht=True (rht switches the transform "
                         "on, rht_d is its size)")
    if opts.get("scale") is not None and opts.get("amax") is not None:
        raise ValueError(f"{fmt.value}: give a scale (delayed scaling) or an amax, not both")
    given = [k for k in _SR_SOURCES if opts.get(k) is not None]
    if given and not opts.get("stochastic", False):
        raise ValueError(f"{given[0]} is only used by stochastic rounding; pass stochastic=True "
                         "or leave it out")
    if len(given) > 1:
        raise ValueError(f"give at most one source of random bits, got {' and '.join(given)}")
    check_input_meta(xv, fmt.value, *quantize_blocks(fmt, opts))
    if opts.get("rand_bits") is not None:
        check_rand_bits(opts["rand_bits"], xv.numel(), xv.device)
    d = opts.get("rht_d", 16 if fmt == "nvfp4" else 32)
    if opts.get("rht") and xv.shape[-1] % d:
        raise ValueError(f"rht: last dimension ({xv.shape[-1]}) must be a multiple of the RHT "
                         f"size d={d}")
    return opts
