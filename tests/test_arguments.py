"""Argument fuzzing of every public entry point: a wrong argument is a named error, never a
different request.

Each test crosses one entry point's arguments with a pool of junk values (wrong kinds: ints,
floats, strings, None, lists, dtypes, generators, tensors of every wrong dtype, shape and
device; wrong values: out-of-range sizes, 0/NaN/negative scales) and checks every outcome:

* the call succeeds only if the value is one the argument documents as valid (an oracle per
  argument), so junk is never silently accepted as something else;
* otherwise it raises ``ValueError`` or ``TypeError``, raised by microscale's own code (the
  innermost traceback frame is in the package, not a torch internal), with a message that
  names the argument.

The pool is small and finite, so the cross product runs exhaustively (no sampling) in a
couple of seconds; failures are collected and reported together.
"""

from __future__ import annotations

import math
import os
import traceback

import numpy as np
import pytest
import torch

import microscale as ms

PKG = os.path.dirname(ms.__file__)
X = torch.randn(128, 128, generator=torch.Generator().manual_seed(0))

JUNK = [
    True, False, np.bool_(True), 0, 1, 2, 3, -1, 16, 24, 32, 128, 256, np.int64(16), 1.0, 16.0,
    float("nan"), "yes", "", "ceil", "floor", "round", None, [], (1,), (1, 128), [128, 128],
    (1, 64), (128.0, 128.0), torch.float16, torch.int32, torch.float8_e4m3fn, torch.float8_e5m2,
    torch.Generator(), object(), torch.tensor(2.0), torch.tensor(0.0), torch.tensor(-1.0),
    torch.tensor(float("nan")), torch.tensor(float("inf")), torch.tensor(3), torch.ones(2),
    torch.tensor(2.0, device="meta"), torch.tensor([7], dtype=torch.int64),
    torch.zeros(128, 128, dtype=torch.uint8), torch.zeros(16, 64, dtype=torch.uint8),
]


def _is_bool(v):
    return isinstance(v, (bool, np.bool_))


def _is_int(v, ok):
    """An int (not a bool) in ``ok`` (a set or a range)."""
    return isinstance(v, (int, np.integer)) and not _is_bool(v) and int(v) in ok


def _scalar_ok(v):
    return isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel() == 1 and \
        v.device.type == "cpu" and math.isfinite(float(v)) and float(v) > 0


VALID = {   # option -> is this value one the option documents as valid?
    "block_2d": _is_bool, "rht": _is_bool, "stochastic": _is_bool, "check_finite": _is_bool,
    "pow2_scales": _is_bool,
    "rht_d": lambda v: _is_int(v, {2, 4, 8, 16, 32, 64, 128}),
    "scale_rounding": lambda v: isinstance(v, str) and v in ("ceil", "floor"),
    "block": lambda v: isinstance(v, (tuple, list)) and len(v) == 2 and
    all(_is_int(e, {1, 128}) for e in v) and tuple(v) in ((1, 128), (128, 128)),
    "fp8_dtype": lambda v: v in (torch.float8_e4m3fn, torch.float8_e5m2),
    "generator": lambda v: v is None or isinstance(v, torch.Generator),
    "seed": lambda v: v is None or (isinstance(v, torch.Tensor) and v.dtype == torch.int64),
    "rand_bits": lambda v: v is None or (isinstance(v, torch.Tensor) and v.dtype == torch.uint8
                                         and v.numel() == X.numel()),
    "amax": lambda v: v is None or _scalar_ok(v),
    "scale": lambda v: v is None or _scalar_ok(v),
}
# the options each one needs to mean anything (rht_d the RHT, SR sources stochastic=True)
CONTEXT = {"rht_d": {"rht": True}, "generator": {"stochastic": True},
           "seed": {"stochastic": True}, "rand_bits": {"stochastic": True}}
NAMES = {"fmt": ("format",), "x": ("tensor", "dtype", "empty", "0-dim", "divisible"),
         "tensor": ("tensor", "dimension"), "input": ("input", "tensor")}


def outcome(fn, name: str, valid: bool, value=None) -> str | None:
    """None if ``fn()`` behaved (valid: returned; invalid: a named error from microscale)."""
    label = f"{name}={_short(value)}"
    try:
        fn()
    except (ValueError, TypeError) as err:
        if valid:
            return f"{label}: valid value rejected: {type(err).__name__}: {err}"
        frame = traceback.extract_tb(err.__traceback__)[-1]
        if not frame.filename.startswith(PKG):
            return f"{label}: raised outside microscale ({frame.filename}:{frame.lineno}): {err}"
        words = NAMES.get(name, (name,))
        if not any(w.lower() in str(err).lower() for w in words):
            return f"{label}: the message does not name it: {err}"
        return None
    except Exception as err:              # noqa: BLE001 (what we hunt: internal tracebacks)
        return f"{label}: {type(err).__name__} instead of a named error: {err}"
    return None if valid else f"{label}: junk silently accepted"


def _short(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"tensor({value.dtype}, {tuple(value.shape)}, {value.device.type})"
    return repr(value)[:40]


def report(failures):
    failures = [f for f in failures if f]
    assert not failures, f"{len(failures)} bad outcome(s):\n" + "\n".join(failures[:40])


@pytest.mark.parametrize("fmt", ms.FORMATS)
def test_quantize_options_fuzz(fmt):
    from microscale.validate import COMMON_OPTIONS, FORMAT_OPTIONS
    failures = []
    for name in sorted(FORMAT_OPTIONS[fmt] | COMMON_OPTIONS):
        for value in JUNK:
            opts = {**CONTEXT.get(name, {}), name: value}
            failures.append(outcome(lambda: ms.quantize(X, fmt, **opts), name,
                                    VALID[name](value), value))
    report(failures)


@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp8_e4m3", "fp8_block"])
def test_quantize_x_fmt_backend_fuzz(fmt):
    xs = JUNK + [torch.ones(4, 100), torch.ones(3, 128, dtype=torch.float64), torch.ones(()),
                 torch.ones(0, 128), torch.ones(16, 128, dtype=torch.complex64), X.numpy()]
    failures = [outcome(lambda: ms.quantize(x, fmt), "x", False, x) for x in xs]
    failures += [outcome(lambda: ms.quantize(X, v), "fmt", v in ms.FORMATS, v) for v in JUNK]
    failures += [outcome(lambda: ms.quantize(X, fmt, backend=v), "backend",
                         v in ("reference", "auto"), v) for v in JUNK]
    report(failures)


def test_quantize_rowcol_fuzz():
    failures = []
    for value in JUNK + [("nvfp4",), ("nvfp4", [1]), ("nvfp4", {"rht": 32})]:
        ok = value is None
        failures.append(outcome(lambda: ms.quantize_rowcol(X, value, None), "row", ok, value))
        failures.append(outcome(lambda: ms.quantize_rowcol(X, None, value), "col", ok, value))
    report(failures)


def test_scaled_mm_and_dequantize_fuzz():
    qa, qb = ms.quantize(X, "nvfp4"), ms.quantize(X, "nvfp4")
    floats = (torch.float32, torch.bfloat16, torch.float16)
    failures = []
    for v in JUNK:
        failures.append(outcome(lambda: ms.scaled_mm(qa, qb, out_dtype=v), "out_dtype",
                                v in floats, v))
        failures.append(outcome(lambda: ms.scaled_mm(qa, qb, backend=v), "backend",
                                v in ("reference", "auto"), v))
        failures.append(outcome(lambda: ms.scaled_mm(v, qb), "qa", False, v))
        failures.append(outcome(lambda: qa.dequantize(v), "dtype", v in floats, v))
        failures.append(outcome(lambda: qa.dequantize(undo_rht=v), "undo_rht", _is_bool(v), v))
        failures.append(outcome(lambda: ms.dequantize(v), "QuantizedTensor", False, v))
    report(failures)


def test_pack_fp4_codes():
    good = torch.arange(16, dtype=torch.uint8)
    assert torch.equal(ms.unpack_fp4(ms.pack_fp4(good)), good)
    def codes_ok(v):
        return isinstance(v, torch.Tensor) and v.dtype == torch.uint8 and v.dim() > 0 and \
            v.shape[-1] % 2 == 0 and v.device.type == "cpu" and int(v.max()) <= 15

    failures = [outcome(lambda: ms.pack_fp4(v), "codes", codes_ok(v), v)
                for v in JUNK + [torch.tensor([16, 0], dtype=torch.uint8),
                                 torch.tensor([255, 3], dtype=torch.uint8), good[:3]]]
    report(failures)


def test_rht_size_and_recipe_fields_fuzz():
    failures = []
    for v in JUNK:
        ok = _is_int(v, {2, 4, 8, 16, 32, 64, 128})
        failures.append(outcome(lambda: ms.rht(X, v), "d", ok, v))
        failures.append(outcome(lambda: ms.OperandConfig("nvfp4", rht=v), "rht",
                                _is_int(v, {0, 2, 4, 8, 16, 32, 64, 128}), v))
        failures.append(outcome(lambda: ms.OperandConfig("fp8_tensor", delayed=True, margin=v),
                                "margin", _is_int(v, range(65)), v))
        failures.append(outcome(lambda: ms.OperandConfig("fp8_tensor", history_len=v),
                                "history_len", _is_int(v, range(1, 1 << 24)), v))
        failures.append(outcome(lambda: ms.OperandConfig("mxfp8_e4m3", pow2_scales=v),
                                "pow2_scales", _is_bool(v), v))
        failures.append(outcome(lambda: ms.DelayedScaling(margin=v), "margin",
                                _is_int(v, range(65)), v))
    report(failures)


@pytest.mark.parametrize("text, match", [
    ("{not json", "not valid JSON"), ("[]", "JSON object"), ('{"name": "x"}', "missing key"),
    (None, "JSON string"),
])
def test_malformed_recipe_json_is_a_named_error(text, match):
    with pytest.raises((ValueError, TypeError), match=match):
        ms.Recipe.from_json(text)
    d = ms.Recipe.from_name("nvfp4").to_dict()
    d["fprop"]["a"]["bogus"] = 1
    with pytest.raises(ValueError, match="unknown key.*bogus"):
        ms.Recipe.from_dict(d)
    d = ms.Recipe.from_name("nvfp4").to_dict()
    d["wgrad"]["a"]["rht"] = "16"
    with pytest.raises(TypeError, match="rht must be an int"):
        ms.Recipe.from_dict(d)


def test_meta_tensors_infer_shapes_after_the_same_checks():
    """A meta tensor has no values: quantize returns meta tensors of the right layout."""
    x = torch.empty(32, 64, device="meta")
    q = ms.quantize(x, "nvfp4", block_2d=True)
    assert q.data.device.type == "meta" and q.data.shape == (32, 32) and q.scale.shape == (32, 4)
    with pytest.raises(ValueError, match="not divisible"):
        ms.quantize(torch.empty(32, 40, device="meta"), "nvfp4")
    with pytest.raises(TypeError, match="dtype"):
        ms.quantize(torch.empty(32, 64, device="meta", dtype=torch.int32), "nvfp4")
    assert ms.scaled_mm(q, q, out_dtype=torch.bfloat16).shape == (32, 32)
    assert q.dequantize(torch.float16).shape == (32, 64)
    layer = ms.Linear(64, 48, recipe="nvfp4", device="meta")
    y = layer(torch.empty(2, 5, 64, device="meta", dtype=torch.bfloat16))
    assert y.shape == (2, 5, 48) and y.dtype == torch.bfloat16 and y.device.type == "meta"
    with pytest.raises(ValueError, match="input is on cpu"):
        layer(torch.empty(2, 64))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("backend", ["reference", "triton"])
@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_given_amax_and_scale_values_on_both_backends(backend, bad):
    """0, negative, NaN and Inf are named errors on the reference and the kernel alike (the
    value check reads one number, so check_finite=False skips it, as it skips x's check)."""
    if backend == "triton" and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("the kernel path on CPU needs TRITON_INTERPRET=1")
    with pytest.raises(ValueError, match="given amax must be finite and > 0"):
        ms.quantize(X, "nvfp4", amax=torch.tensor(bad), backend=backend)
    with pytest.raises(ValueError, match="given scale must be finite and > 0"):
        ms.quantize(X, "fp8_tensor", scale=torch.tensor(bad), backend=backend)
    ok = ms.quantize(X, "nvfp4", amax=torch.tensor(2.0), backend=backend)
    assert ok.amax.item() == 2.0


@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors")
def test_layer_conversion_and_schedule_arguments_fuzz():
    from torch import nn

    def model():
        return nn.Sequential(nn.Linear(32, 32), nn.Linear(32, 32))

    layer = ms.Linear(32, 32, recipe="nvfp4")
    sizes = range(0, 1 << 20)
    failures = []
    for v in JUNK:
        failures += [
            outcome(lambda: ms.Linear(v, 16, recipe="bf16"), "in_features", _is_int(v, sizes), v),
            outcome(lambda: ms.Linear(16, v, recipe="bf16"), "out_features", _is_int(v, sizes), v),
            outcome(lambda: ms.Linear(16, 16, bias=v), "bias", _is_bool(v), v),
            outcome(lambda: ms.Linear(16, 16, recipe=v), "recipe", False, v),
            outcome(lambda: ms.Linear(16, 16, generator=v), "generator",
                    v is None or isinstance(v, torch.Generator), v),
            outcome(lambda: layer(v), "input", False, v),
            outcome(lambda: ms.convert(model(), "nvfp4", keep_high_precision=v),
                    "keep_high_precision", v is None or (isinstance(v, list) and not v), v),
            outcome(lambda: ms.convert(model(), "nvfp4", on_error=v), "on_error",
                    v in ("raise", "skip"), v),
            outcome(lambda: ms.convert(model(), "nvfp4", on_unmatched=v), "on_unmatched", False, v),
            outcome(lambda: ms.convert(model(), v), "recipe", False, v),
            outcome(lambda: ms.PrecisionSchedule(v), "switch_step",
                    v is None or _is_int(v, sizes), v),
            outcome(lambda: ms.high_precision(v).__enter__(), "model", False, v),
            outcome(lambda: ms.rht(v), "tensor", False, v),
        ]
    report(failures)
