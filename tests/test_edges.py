"""The edge rules of docs/SPEC.md ("Notes"), one worked example each, on both backends, plus a
property for the GEMM: with NaN/Inf input under ``check_finite=False`` the Triton GEMMs and the
reference put NaN in the same outputs and agree everywhere else.

The examples are the ones written in the spec, byte for byte: change a rule and both move.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import microscale as ms
from microscale.quant.fp8 import delayed_scale_update_

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

INTERP = os.environ.get("TRITON_INTERPRET", "0") == "1"
EXAMPLES = int(os.environ.get("MICROSCALE_EXAMPLES", "20"))      # as in test_properties.py
BACKENDS = ["reference", "triton"] if INTERP else ["reference"]
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
INF, NAN = float("inf"), float("nan")
FLT_MAX = torch.finfo(torch.float32).max


def _bytes(t: torch.Tensor) -> list[int]:
    return t.reshape(-1).view(torch.uint8).tolist()


def _row(n: int, head: list[float], at: int = 0) -> torch.Tensor:
    x = torch.zeros(1, n)
    x[0, at:at + len(head)] = torch.tensor(head)
    return x


# ----------------------------------------------------------------------------- saturation
@pytest.mark.parametrize("backend", BACKENDS)
def test_top_element_rounding_into_the_next_binade_saturates_on_dequantize(backend):
    """fp16 65504 in MXFP8 E4M3: k = 8 (byte 135), 65504/256 = 255.875 rounds to 256 (0x78);
    256 · 2^8 = 65536 is finite in fp32 and saturates to 65504 in fp16 (was: inf)."""
    x = torch.full((4, 128), 65504.0, dtype=torch.float16)
    q = ms.quantize(x, "mxfp8_e4m3", backend=backend)
    assert _bytes(q.data)[0] == 0x78 and q.scale[0, 0].item() == 135
    assert q.dequantize(torch.float32)[0, 0].item() == 65536.0
    assert bool((q.dequantize(torch.float16) == 65504).all())
    for fmt in ms.FORMATS:            # every format, the fp32 top too
        for xx in (x, torch.full((4, 128), FLT_MAX)):
            y = ms.quantize(xx, fmt, backend=backend).dequantize(xx.dtype)
            assert bool(torch.isfinite(y).all()), fmt


@pytest.mark.parametrize("backend", BACKENDS)
def test_rht_near_the_fp32_maximum_is_clamped_not_overflowed(backend):
    """A 16-chunk of FLT_MAX: clamped to L(16) = 2^125, rotated to ±2^125 and 0 (was: ±Inf, and
    the backends disagreed); amax = 2^126."""
    x = torch.full((1, 16), FLT_MAX)
    y = ms.rht(x)
    assert y[0, :4].tolist() == [-2.0 ** 125, 0.0, 2.0 ** 125, 0.0]
    q = ms.quantize(x, "nvfp4", rht=True, backend=backend)
    assert q.amax.item() == 2.0 ** 126 and q.scale.float().item() == 448.0
    assert bool(torch.isfinite(q.dequantize()).all())


def test_rht_output_saturates_to_the_input_dtype():
    """fp16 ``x = 16384 · s`` (s the d = 16 sign vector) rotates to ``y_0 = 4 · 16384 = 65536``,
    past fp16's 65504: saturated to 65504 instead of Inf."""
    x = (torch.tensor(ms.hadamard.RHT_SIGNS_16, dtype=torch.float32) * 16384).to(torch.float16)
    y = ms.rht(x.reshape(1, 16))
    assert bool(torch.isfinite(y).all()) and y[0, 0].item() == 65504.0
    assert ms.hadamard.rht_input_limit(16) == 2.0 ** 125
    assert ms.hadamard.rht_input_limit(32) == 2.0 ** 124


# ----------------------------------------------------------------------------- non-finite
@pytest.mark.parametrize("backend", BACKENDS)
def test_nonfinite_worked_examples(backend):
    """docs/SPEC.md "Notes: non-finite input", byte for byte."""
    q = ms.quantize(_row(32, [INF, 1.0, -2.0]) + _row(32, [NAN, 3.0], at=16), "nvfp4",
                    check_finite=False, backend=backend)
    assert q.amax.item() == INF and _bytes(q.scale) == [0x7E, 0x7F]
    assert _bytes(q.data)[:2] == [0x07, 0x08]
    y = q.dequantize()
    assert y[0, 0].item() == 2688.0 and bool(torch.isnan(y[0, 16:]).all())
    assert bool(torch.isfinite(y[0, :16]).all())

    q = ms.quantize(_row(32, [INF, 1.0, NAN, 600.0]), "mxfp8_e4m3", check_finite=False,
                    backend=backend)
    assert _bytes(q.data)[:4] == [0x7E, 0x38, 0x7F, 0x7E] and _bytes(q.scale) == [0x7F]

    q = ms.quantize(_row(64, [INF, 1.0, 0.75]) + _row(64, [NAN, 1.0, 0.75], at=32), "mxfp4",
                    check_finite=False, backend=backend)
    assert _bytes(q.scale) == [0x7F, 0xFF] and _bytes(q.data)[:2] == [0x27, 0x02]

    for fmt, n in (("fp8_block", 128), ("fp8_tensor", 16)):
        q = ms.quantize(_row(n, [INF, 3.0, NAN]), fmt, check_finite=False, backend=backend)
        assert _bytes(q.data)[:3] == [0x7E, 0x44, 0x7F] and q.scale.reshape(-1)[0].item() == 1.0
        assert q.dequantize()[0, :2].tolist() == [448.0, 3.0]


def test_one_inf_in_fp8_tensor_no_longer_turns_the_tensor_into_nan():
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(1))
    x[3, 7] = INF
    q = ms.quantize(x, "fp8_tensor", check_finite=False)
    y = q.dequantize()
    assert bool(torch.isfinite(y).all()) and y[3, 7].item() == 448.0
    torch.testing.assert_close(y[0], x[0], rtol=0.07, atol=2.0 ** -9)   # scale 1: E4M3 grid


def test_nvfp4_gemm_factor_uses_s_dec_1_for_an_infinite_amax():
    inf_amax, finite = torch.tensor(INF), torch.tensor(6.0)
    assert ms.quant.nvfp4.nvfp4_alpha(inf_amax, finite).item() == pytest.approx(2688 * 6 / 7225344)
    a = torch.ones(4, 32)
    a[0, 0] = INF
    qa = ms.quantize(a, "nvfp4", check_finite=False)
    y = ms.scaled_mm(qa, ms.quantize(torch.ones(8, 32), "nvfp4"))
    assert bool(torch.isfinite(y).all())


def test_delayed_scaling_keeps_its_scale_when_the_new_one_is_unusable():
    hist, scale = torch.zeros(4), torch.tensor(2.0)
    delayed_scale_update_(hist, scale, torch.tensor(1e-30), 448.0, 64)   # 448/1e-30/2^64 fine
    assert scale.item() == pytest.approx(448.0 / 1e-30 / 2.0 ** 64, rel=1e-6)
    hist, scale = torch.zeros(4), torch.tensor(2.0)
    delayed_scale_update_(hist, scale, torch.tensor(3e38), 448.0, 64)    # underflows to 0
    assert scale.item() == 2.0
    for bad in (INF, NAN):
        delayed_scale_update_(torch.zeros(4), scale, torch.tensor(bad), 448.0, 0)
        assert scale.item() == 2.0


# ----------------------------------------------------------------------------- GEMM property
GEMMS = {
    "nvfp4": ("nvfp4", "nvfp4"), "mxfp4": ("mxfp4", "mxfp4"),
    "mxfp8": ("mxfp8_e5m2", "mxfp8_e4m3"), "fp8_block": ("fp8_block", "fp8_block"),
    "fp8_tensor": ("fp8_tensor", "fp8_tensor"),
}


def _operand(rng, rows: int, k: int, nonfinite: bool) -> torch.Tensor:
    x = rng.standard_normal((rows, k)) * np.exp2(rng.integers(-30, 31, size=(rows, 1)))
    if nonfinite:
        for value in (np.inf, -np.inf, np.nan):
            x.flat[rng.choice(x.size, size=int(rng.integers(0, 3)), replace=False)] = value
    return torch.from_numpy(x).float()


@pytest.mark.skipif(not INTERP, reason="needs TRITON_INTERPRET=1 (CPU kernels)")
@pytest.mark.parametrize("key", sorted(GEMMS))
@settings(max_examples=EXAMPLES // 2, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), nonfinite=st.booleans())
def test_scaled_mm_backends_agree_at_the_edges(key, seed, nonfinite):
    """NaN in the same outputs on both backends; finite elsewhere and equal up to summation
    order (bound: 1e-5 · Σ_k |a_mk b_nk|, the rows span 2^±30)."""
    rng = np.random.default_rng(seed)
    fa, fb = GEMMS[key]
    a, b = _operand(rng, 16, 128, nonfinite), _operand(rng, 24, 128, nonfinite)
    qa = ms.quantize(a, fa, check_finite=not nonfinite)
    qb = ms.quantize(b, fb, check_finite=not nonfinite)
    y_r = ms.scaled_mm(qa, qb, backend="reference")
    y_k = ms.scaled_mm(qa, qb, backend="triton")
    nan = torch.isnan(y_r)
    assert torch.equal(nan, torch.isnan(y_k))
    assert bool(torch.isfinite(y_r[~nan]).all()) and bool(torch.isfinite(y_k[~nan]).all())
    bound = qa.dequantize(undo_rht=False).abs() @ qb.dequantize(undo_rht=False).abs().t()
    assert bool(((y_k - y_r).abs()[~nan] <= 1e-5 * bound[~nan] + 1e-30).all())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or INTERP, reason="needs CUDA (no interpreter)")
@pytest.mark.parametrize("key", sorted(GEMMS))
@settings(max_examples=EXAMPLES, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), nonfinite=st.booleans())
def test_gpu_scaled_mm_matches_the_cpu_reference_at_the_edges(key, seed, nonfinite):
    """The same property on the real GEMMs (cuBLAS, torch._scaled_mm, Triton), SPEC §6's 8e-3."""
    rng = np.random.default_rng(seed)
    fa, fb = GEMMS[key]
    a, b = _operand(rng, 64, 256, nonfinite), _operand(rng, 48, 256, nonfinite)
    qa, qb = (ms.quantize(t, f, check_finite=not nonfinite) for t, f in ((a, fa), (b, fb)))
    y_r = ms.scaled_mm(qa, qb, backend="reference")
    qa_k, qb_k = (ms.quantize(t.cuda(), f, check_finite=not nonfinite, backend="triton")
                  for t, f in ((a, fa), (b, fb)))
    y_k = ms.scaled_mm(qa_k, qb_k, backend="auto").cpu()
    nan = torch.isnan(y_r)
    assert torch.equal(nan, torch.isnan(y_k))
    bound = qa.dequantize(undo_rht=False).abs() @ qb.dequantize(undo_rht=False).abs().t()
    assert bool(((y_k - y_r).abs()[~nan] <= 8e-3 * bound[~nan] + 1e-30).all())
