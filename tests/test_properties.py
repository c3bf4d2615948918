"""Edge-value properties of every format, drawn by hypothesis: the contract of docs/SPEC.md
("Notes") checked on random shapes, dtypes and values, extremes first.

For every format and option set (``CASES``):

1. finite in ⇒ finite out: quantize never fails on finite input and ``dequantize`` (to the
   input dtype and to fp32) is finite everywhere, even when a block's top element rounds into
   the next binade or the RHT meets values near the fp32 maximum;
2. the reference and the Triton kernel agree bit for bit (codes, scale bytes, amax), on finite
   input and, with ``check_finite=False``, on ±Inf/NaN input;
3. non-finite input: ``check_finite=True`` raises a ValueError naming NaN or Inf on both
   backends; ``check_finite=False`` gives the specified result: Inf dequantizes to a finite
   value, and NaN comes back exactly where the format stores it (the NaN element of an FP8
   format; the whole 1×16 / 16×16 / 1×32 block of an E2M1 format);
4. power-of-two-scaled formats (MX, FP8 with pow-2 scales) are projections: quantizing the
   dequantized tensor again gives the same values;
5. ``quantize_rowcol``, the layers' one-pass call (``check_finite=False``), gives both views
   bit for bit on both backends, non-finite input included.

The values: per block one magnitude scale from the dtype's whole range (subnormals to the
top binade) with 8-bit (fp16: 11-bit) integer mantissas, then extremes written over random
positions (±max, ±min normal, ±min subnormal, ±0, one outlier per block), then ±Inf/NaN.
RHT cases keep each 16-chunk on one scale (and put Inf only into chunks at the top binade),
so every chunk sum is exact in fp32 and bit-exactness does not depend on summation order
(see test_kernels_quant.py). On CPU the kernels run in Triton's interpreter; the ``gpu``
variants re-run properties 1-3 on the real kernels (CUDA) against the CPU reference.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import microscale as ms

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

INTERP = os.environ.get("TRITON_INTERPRET", "0") == "1"
# examples per property and case: 20 keeps the CPU suite fast (the interpreter costs ~30 ms a
# kernel call); MICROSCALE_EXAMPLES=200 for a deeper run. The GPU variant draws 3x as many.
EXAMPLES = int(os.environ.get("MICROSCALE_EXAMPLES", "20"))
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")   # interpreter: IEEE 1/0
needs_kernels = pytest.mark.skipif(not INTERP, reason="needs TRITON_INTERPRET=1 (CPU kernels)")
E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2

# (id, format, options, block along cols, rows multiple)
CASES = [
    ("nvfp4", "nvfp4", {}, 16, 1), ("nvfp4_2d", "nvfp4", {"block_2d": True}, 16, 16),
    ("nvfp4_rht", "nvfp4", {"rht": True}, 16, 1),
    ("nvfp4_sr", "nvfp4", {"stochastic": True}, 16, 1),
    ("mxfp8_e4m3", "mxfp8_e4m3", {}, 32, 1),
    ("mxfp8_e5m2_floor", "mxfp8_e5m2", {"scale_rounding": "floor"}, 32, 1),
    ("mxfp4", "mxfp4", {}, 32, 1), ("mxfp4_sr", "mxfp4", {"stochastic": True}, 32, 1),
    ("fp8_block", "fp8_block", {}, 128, 1),
    ("fp8_block_2d", "fp8_block", {"block": (128, 128)}, 128, 128),
    ("fp8_block_e5m2_nopow2", "fp8_block", {"pow2_scales": False, "fp8_dtype": E5}, 128, 1),
    ("fp8_tensor", "fp8_tensor", {}, 16, 1),
    ("fp8_tensor_pow2_e5m2", "fp8_tensor", {"pow2_scales": True, "fp8_dtype": E5}, 16, 1),
]
IDS = [c[0] for c in CASES]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
PROJECTIONS = ["mxfp8_e4m3", "mxfp8_e5m2_floor", "mxfp4", "fp8_block", "fp8_tensor_pow2_e5m2"]


# ----------------------------------------------------------------------------- values
def _exponents(dtype) -> list[int]:
    """Block scales 2^e from the subnormals to the top binade of ``dtype``."""
    if dtype == torch.float16:
        return [-24, -20, -14, -8, 0, 4, 5]
    low = -133 if dtype == torch.bfloat16 else -140
    return [low, -126, -60, -8, 0, 8, 60, 100, 120]


def _extremes(dtype) -> list[float]:
    fi = torch.finfo(dtype)
    tiny_sub = {torch.float32: 2.0 ** -149, torch.bfloat16: 2.0 ** -133, torch.float16: 2.0 ** -24}
    return [fi.max, -fi.max, fi.tiny, -fi.tiny, tiny_sub[dtype], -tiny_sub[dtype], 0.0, -0.0]


@st.composite
def inputs(draw, case, nonfinite: bool, dtype=None, interpreter: bool = INTERP):
    """``(x, dtype)`` for one case: see the module docstring.

    ``interpreter``: Triton's CPU interpreter (3.x) converts *bf16 subnormals* to fp32 wrongly
    (-5.5e-39 loads as -1.03e-38; the GPU converts exactly), so when the kernels run there, bf16
    subnormals are drawn as signed zeros. fp32 and fp16 subnormals are kept.
    """
    _, fmt, opts, bc, br = case
    dtype = dtype or draw(st.sampled_from(DTYPES))
    rows = br * draw(st.integers(1, 2 if br > 1 else 3))
    cols = bc * draw(st.integers(1, 2 if bc >= 128 else 4))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    rht = bool(opts.get("rht"))
    chunk = 16 if rht else bc if bc < 128 else 32
    n = rows * cols
    wide = 2047 if dtype == torch.float16 else 255
    mant = rng.integers(-wide, wide + 1, size=n).astype(np.float64)
    exps = np.repeat(rng.choice(_exponents(dtype), size=n // chunk), chunk).astype(np.float64)
    if not rht:                                   # extremes anywhere, one outlier per block
        spots = rng.random(n) < 0.08
        mant[spots] = 1.0
        exps[spots] = 0.0
        mant[spots] *= rng.choice(_extremes(dtype), size=int(spots.sum()))
        outliers = np.arange(0, n, chunk) + rng.integers(0, chunk, size=n // chunk)
        pick = rng.random(n // chunk) < 0.3
        mant[outliers[pick]], exps[outliers[pick]] = torch.finfo(dtype).max / 2.0 ** 20, 20.0
    x = np.ldexp(mant, exps.astype(np.int64))
    x = np.where(np.abs(x) > torch.finfo(dtype).max, np.sign(x) * torch.finfo(dtype).max, x)
    if nonfinite:
        x = _inject_nonfinite(x, rng, chunk, rht, dtype)
    x = torch.from_numpy(x).to(dtype).reshape(rows, cols)
    if interpreter and dtype == torch.bfloat16:
        x = torch.where(x.abs() < torch.finfo(dtype).tiny, x * 0, x)     # keeps -0, Inf, NaN
    return x, dtype


def _inject_nonfinite(x, rng, chunk: int, rht: bool, dtype):
    n = x.size
    for value in (np.inf, -np.inf, np.nan):
        for pos in rng.choice(n, size=int(rng.integers(0, 3)), replace=False):
            if rht and not np.isnan(value):
                if dtype == torch.float16:
                    continue                      # fp16 chunks cannot hold the top binade
                c0 = pos - pos % chunk            # keep the chunk sum exact: all at 2^120
                x[c0:c0 + chunk] = np.ldexp(rng.integers(-255, 256, size=chunk), 120)
            x[pos] = value
    return x


def _rand_bits(case, x):
    return {"rand_bits": torch.randint(0, 256, x.shape, dtype=torch.uint8,
                                       generator=torch.Generator().manual_seed(x.numel()))} \
        if case[2].get("stochastic") else {}


def quantize(case, x, backend, **extra):
    return ms.quantize(x, case[1], backend=backend, **case[2], **_rand_bits(case, x), **extra)


# ----------------------------------------------------------------------------- checks
def assert_same_bits(q_k, q_r):
    for name in ("data", "scale", "amax"):
        a, b = getattr(q_k, name).cpu(), getattr(q_r, name).cpu()
        a, b = (t.view(torch.uint8) if t.element_size() == 1 else t.view(torch.int32)
                for t in (a, b))
        diff = a != b
        assert not bool(diff.any()), f"{name}: {int(diff.sum())} of {diff.numel()} differ"


def expected_nan(case, x) -> torch.Tensor:
    """Where dequantize must give NaN: the NaN elements (FP8 formats) or their blocks (E2M1)."""
    _, fmt, opts, bc, _ = case
    nan = torch.isnan(x)
    if fmt not in ("nvfp4", "mxfp4"):
        return nan
    rows, cols = nan.shape
    if opts.get("block_2d"):
        tiles = nan.reshape(rows // 16, 16, cols // 16, 16).any(dim=3).any(dim=1)
        return tiles.repeat_interleave(16, 0).repeat_interleave(16, 1)
    return nan.reshape(rows, cols // bc, bc).any(-1).repeat_interleave(bc, 1)


def check_finite_out(q, x):
    for dtype in (x.dtype, torch.float32):
        y = q.dequantize(dtype)
        assert bool(torch.isfinite(y).all()), f"non-finite dequantize({dtype}) of finite input"


def check_nonfinite_out(case, q, x):
    y = q.dequantize(torch.float32).cpu()
    want = expected_nan(case, x.cpu())
    assert torch.equal(torch.isnan(y), want), "NaN is not exactly where the spec stores it"
    assert bool(torch.isfinite(y[~want]).all()), "Inf input must dequantize to a finite value"


# ----------------------------------------------------------------------------- properties
@needs_kernels
@pytest.mark.parametrize("case", CASES, ids=IDS)
@settings(max_examples=EXAMPLES, deadline=None)
@given(data=st.data())
def test_finite_in_finite_out_and_backends_agree(case, data):
    x, _ = data.draw(inputs(case, nonfinite=False))
    q_r, q_k = quantize(case, x, "reference"), quantize(case, x, "triton")
    assert_same_bits(q_k, q_r)
    check_finite_out(q_r, x)


@needs_kernels
@pytest.mark.parametrize("case", CASES, ids=IDS)
@settings(max_examples=EXAMPLES, deadline=None)
@given(data=st.data())
def test_nonfinite_input_specified_and_backends_agree(case, data):
    x, _ = data.draw(inputs(case, nonfinite=True))
    if bool(torch.isfinite(x).all()):
        return
    bad = "NaN" if bool(torch.isnan(x).any()) else "Inf"
    for backend in ("reference", "triton"):
        with pytest.raises(ValueError, match=bad):
            quantize(case, x, backend)
    q_r = quantize(case, x, "reference", check_finite=False)
    q_k = quantize(case, x, "triton", check_finite=False)
    assert_same_bits(q_k, q_r)
    check_nonfinite_out(case, q_r, x)


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in PROJECTIONS], ids=PROJECTIONS)
@settings(max_examples=2 * EXAMPLES, deadline=None)
@given(data=st.data())
def test_pow2_scaled_formats_are_projections(case, data):
    x, _ = data.draw(inputs(case, nonfinite=False, interpreter=False))
    y1 = quantize(case, x, "reference").dequantize(torch.float32)
    y2 = quantize(case, y1, "reference").dequantize(torch.float32)
    assert torch.equal(y1, y2)


# the views ms.Linear asks for in one pass (row view, column view of xᵀ), no RHT (its column
# chunks run across the drawn blocks' scales; test_kernels_quant.py covers it on exact values)
ROWCOL = {   # name -> (row view, column view, rows multiple the column view needs)
    "nvfp4": (("nvfp4", {}), ("nvfp4", {"stochastic": True}), 16),
    "nvfp4_2d": (("nvfp4", {"block_2d": True}), ("nvfp4", {"block_2d": True}), 16),
    "mxfp8": (("mxfp8_e4m3", {}), ("mxfp8_e5m2", {}), 32),
    "fp8_block": (("fp8_block", {}), ("fp8_block", {}), 128),
    "fp8_block_2d": (("fp8_block", {"block": (128, 128)}), ("fp8_block", {"block": (128, 128)}),
                     128),
    "fp8_tensor": (("fp8_tensor", {}), ("fp8_tensor", {"fp8_dtype": E5}), 1),
}
_BLOCK_COLS = {"nvfp4": 16, "mxfp8_e4m3": 32, "fp8_block": 128, "fp8_tensor": 16}


@needs_kernels
@pytest.mark.parametrize("pair", sorted(ROWCOL))
@settings(max_examples=EXAMPLES, deadline=None)
@given(data=st.data(), nonfinite=st.booleans())
@pytest.mark.slow
def test_rowcol_views_agree_at_the_edges(pair, data, nonfinite):
    """quantize_rowcol (the layers' call, with check_finite=False): both views bit for bit."""
    row, col, rows_multiple = ROWCOL[pair]
    case = (pair, row[0], row[1], _BLOCK_COLS[row[0]], rows_multiple)
    x, _ = data.draw(inputs(case, nonfinite=nonfinite))
    views = []
    for fmt, opts in (row, col):
        opts = {**opts, "check_finite": False}
        if opts.get("stochastic"):
            opts["rand_bits"] = torch.randint(0, 256, x.shape, dtype=torch.uint8)
        views.append((fmt, opts))
    q_r = ms.quantize_rowcol(x, *views, backend="reference")
    q_k = ms.quantize_rowcol(x, *views, backend="triton")
    for a, b in zip(q_k, q_r):
        assert_same_bits(a, b)


# ----------------------------------------------------------------------------- GPU re-runs
gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available() or INTERP,
                                reason="needs CUDA (no interpreter)")


@gpu
@needs_cuda
@pytest.mark.parametrize("case", CASES, ids=IDS)
@settings(max_examples=3 * EXAMPLES, deadline=None)
@given(data=st.data(), nonfinite=st.booleans())
def test_gpu_kernels_match_cpu_reference_at_the_edges(case, data, nonfinite):
    """Properties 1-3 on the real kernels: CUDA kernel vs CPU reference, bit for bit."""
    x, _ = data.draw(inputs(case, nonfinite=nonfinite, interpreter=False))
    extra = {"check_finite": False} if nonfinite else {}
    q_r = quantize(case, x, "reference", **extra)
    q_k = ms.quantize(x.cuda(), case[1], backend="triton", **case[2], check_finite=not nonfinite,
                      **{k: v.cuda() for k, v in _rand_bits(case, x).items()})
    assert_same_bits(q_k, q_r)
    if nonfinite:
        check_nonfinite_out(case, q_k, x)
    else:
        check_finite_out(q_k, x)
