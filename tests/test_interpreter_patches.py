"""The suite's speed-ups of Triton's interpreter (``conftest.py``) give Triton's own results.

``_numpy_max_keep_nan`` reduces ``_utils.max_keep_nan`` with ``np.max`` instead of Triton's
element-by-element fold, and ``_patch_lang_once_a_launch`` skips a helper call's patching of
``tl`` that its launch has done. A kernel that calls a helper and reduces with that maximum
(NaN, ±Inf, zeros, a row without NaN) gives the same bits with each patch as with Triton's
original. ``_overflow_check_only_when_asserted`` builds the signed-integer overflow check only
where its assert acts: an overflowing add wraps the same way without ``debug``, and still
fails with it. ``_exact_bf16_widening`` is a fix, not a speed-up: bf16 widens to fp32 by its
bits, as on the GPU, where Triton's own conversion misplaces subnormals.
"""

import dataclasses
import os

import pytest
import torch

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from microscale.kernels._utils import max_keep_nan  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                reason="the patches apply to Triton's interpreter")


@triton.jit
def _row_max_kernel(x_ptr, o_ptr, R: tl.constexpr, C: tl.constexpr):
    v = tl.load(x_ptr + tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :])
    tl.store(o_ptr + tl.arange(0, R), max_keep_nan(tl.abs(v), 1))


def _row_max() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 16, generator=g)
    x[1, 3], x[2, 0], x[2, 15] = float("nan"), float("inf"), -float("nan")
    x[4] = 0.0
    x[5, 7] = -float("inf")
    out = torch.empty(8)
    _row_max_kernel[(1,)](x, out, 8, 16)
    return out


def _patched(obj, name):
    original = getattr(getattr(obj, name), "triton_original", None)
    if original is None:
        pytest.skip("conftest left this Triton's interpreter as it is")
    return original


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0))


def test_numpy_max_keep_nan_is_tritons_fold(monkeypatch):
    from triton.runtime import interpreter
    original = _patched(interpreter.ReduceOps, "apply_impl")
    fast = _row_max()
    assert fast.isnan()[[1, 2]].all() and not fast.isnan()[[0, 3, 4, 5]].any()
    assert fast[4] == 0 and fast[5] == float("inf")
    monkeypatch.setattr(interpreter.ReduceOps, "apply_impl", original)
    assert _same_bits(fast, _row_max())


def test_patch_lang_once_a_launch_patches_the_same(monkeypatch):
    from triton.runtime import interpreter
    original = _patched(interpreter, "_patch_lang")
    fast = _row_max()
    monkeypatch.setattr(interpreter, "_patch_lang", original)
    assert _same_bits(fast, _row_max())


@triton.jit
def _add_kernel(a_ptr, b_ptr, o_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(o_ptr + i, tl.load(a_ptr + i) + tl.load(b_ptr + i))


def _add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    _add_kernel[(1,)](a, b, out, a.numel())
    return out


def test_overflow_check_only_where_it_asserts(monkeypatch):
    from triton.language.semantic import TritonSemantic
    from triton.runtime import interpreter
    original = _patched(TritonSemantic, "binary_op_sanitize_overflow_impl")
    big = torch.full((4,), 2**31 - 1, dtype=torch.int32)
    one = torch.tensor([1, 0, -1, 1], dtype=torch.int32)
    fast = _add(big, one)                  # no debug: the check would assert nothing
    assert fast.tolist() == [-2**31, 2**31 - 1, 2**31 - 2, -2**31]
    monkeypatch.setattr(TritonSemantic, "binary_op_sanitize_overflow_impl", original)
    assert torch.equal(fast, _add(big, one))
    monkeypatch.undo()
    builder = interpreter.interpreter_builder
    monkeypatch.setattr(builder, "options", dataclasses.replace(builder.options, debug=True))
    with pytest.raises(Exception, match="overflow"):     # with debug, the patched check fails
        _add(big, one)


@triton.jit
def _widen_kernel(x_ptr, o_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(o_ptr + i, tl.load(x_ptr + i).to(tl.float32))


def test_bf16_widening_is_exact():
    """Every bf16 bit pattern (NaNs, Infs, zeros, subnormals) widens to the fp32 whose top half
    it is, as torch widens it; Triton's own conversion, kept as ``triton_original``, misplaces
    the subnormals and nothing else."""
    from triton.runtime import interpreter
    convert = interpreter._convert_float
    original = getattr(convert, "triton_original", None)
    assert original is not None, "conftest's _exact_bf16_widening is not in place"
    x = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    out = torch.empty(x.numel(), dtype=torch.float32)
    _widen_kernel[(1,)](x, out, x.numel())
    assert torch.equal(out.view(torch.int32), x.float().view(torch.int32))
    raw = x.view(torch.int16).numpy()
    theirs = original(raw, tl.bfloat16, tl.float32, None).view("uint32")
    ours = convert(raw, tl.bfloat16, tl.float32, None).view("uint32")
    exp_bits = (raw.view("uint16") >> 7) & 0xFF
    subnormal = (exp_bits == 0) & ((raw.view("uint16") & 0x7F) != 0)
    assert (theirs != ours)[subnormal].all() and (theirs == ours)[~subnormal].all()
