"""``ms.scaled_mm`` reference (SPEC §6) against an independent float64 loop.

The oracle decodes the stored bytes itself (numpy + ml_dtypes: E2M1 nibbles, E4M3/E5M2
bytes, UE8M0 exponents, fp32 scale_inv), forms ``value · block_scale`` per element, sums the
products row by row in float64 and applies the per-tensor factor (NVFP4 × NVFP4:
``α = amax_a · amax_b / 7225344``; everything else 1). Tolerance: atol = rtol = 8e-3.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

import microscale as ms

E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6])
FP8_ML = {torch.float8_e4m3fn: ml_dtypes.float8_e4m3fn, torch.float8_e5m2: ml_dtypes.float8_e5m2}


def decode_f64(q) -> np.ndarray:
    """``value · block_scale`` as float64 [rows, cols], from q's raw bytes."""
    rows, cols = q.rows, q.shape[-1]
    if q.fmt.value in ("nvfp4", "mxfp4"):
        b = q.data.numpy()
        vals = E2M1[np.stack([b & 0xF, b >> 4], -1).reshape(rows, cols)]
    else:
        vals = q.data.view(torch.uint8).numpy().view(FP8_ML[q.data.dtype]).astype(np.float64)
    if q.fmt.value == "nvfp4":
        s = q.scale.view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3fn).astype(np.float64)
        s = np.repeat(s, 16, axis=1)
    elif q.fmt.value.startswith("mx"):
        s = np.repeat(np.exp2(q.scale.numpy().astype(np.float64) - 127), 32, axis=1)
    elif q.fmt.value == "fp8_block":
        br, bc = q.block
        s = np.repeat(np.repeat(q.scale.numpy().astype(np.float64), br, 0), bc, 1)
    else:
        s = np.full((rows, cols), float(q.scale.item()))
    return vals * s


def oracle_mm(qa, qb) -> np.ndarray:
    a, b = decode_f64(qa), decode_f64(qb)
    factor = 1.0
    if qa.fmt.value == "nvfp4" and qb.fmt.value == "nvfp4":
        factor = float(qa.amax) * float(qb.amax) / (6 * 6 * 448 * 448)
    out = np.zeros((a.shape[0], b.shape[0]))
    for m in range(a.shape[0]):
        out[m] = (a[m][None, :] * b).sum(axis=1)
    return (out * factor).reshape(*qa.shape[:-1], qb.shape[0])


def _data(seed, *shape):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


# (A format + options, B format + options, max relative error vs the exact product)
PAIRS = {
    "nvfp4": (("nvfp4", {}), ("nvfp4", {}), 0.2),
    "nvfp4_w2d": (("nvfp4", {}), ("nvfp4", {"block_2d": True}), 0.2),
    "nvfp4_sr": (("nvfp4", {"stochastic": True}), ("nvfp4", {}), 0.25),
    "mxfp8_e4m3": (("mxfp8_e4m3", {}), ("mxfp8_e4m3", {}), 0.05),
    "mxfp8_e5m2": (("mxfp8_e5m2", {}), ("mxfp8_e5m2", {}), 0.1),
    "mxfp4": (("mxfp4", {}), ("mxfp4", {}), 0.25),
    "mxfp4_floor": (("mxfp4", {"scale_rounding": "floor"}), ("mxfp4", {"scale_rounding": "floor"}), 0.3),
    "fp8_block_1x128": (("fp8_block", {}), ("fp8_block", {}), 0.05),
    "fp8_block_128x128": (("fp8_block", {"block": (128, 128)}), ("fp8_block", {"block": (128, 128)}), 0.05),
    "fp8_block_mixed": (("fp8_block", {}), ("fp8_block", {"block": (128, 128)}), 0.05),
    "fp8_tensor_e4m3": (("fp8_tensor", {}), ("fp8_tensor", {}), 0.05),
    "fp8_tensor_e5m2": (("fp8_tensor", {"fp8_dtype": torch.float8_e5m2}),
                        ("fp8_tensor", {"fp8_dtype": torch.float8_e5m2}), 0.1),
    "mxfp8_mixed": (("mxfp8_e4m3", {}), ("mxfp8_e5m2", {}), 0.1),
}


@pytest.mark.parametrize("name", list(PAIRS))
@pytest.mark.parametrize("a_shape", [(128, 256), (2, 64, 256)])  # rows: 128x128 tiles
def test_scaled_mm_matches_f64_loop(name, a_shape):
    (fa, oa), (fb, ob), max_rel = PAIRS[name]
    x = _data(1, *a_shape) * 3.0
    w = _data(2, 128, 256) * 0.05
    qa, qb = ms.quantize(x, fa, **oa), ms.quantize(w, fb, **ob)
    y = ms.scaled_mm(qa, qb, backend="reference")
    assert y.shape == (*a_shape[:-1], 128) and y.dtype == torch.float32
    want = oracle_mm(qa, qb)
    torch.testing.assert_close(y.double(), torch.from_numpy(want), atol=8e-3, rtol=8e-3)
    # a wrong per-tensor factor or scale would still match garbage with garbage: the product
    # must also approximate the exact one to the format's precision
    exact = x.double() @ w.double().t()
    rel = (y.double() - exact).norm() / exact.norm()
    assert rel < max_rel, rel
    assert torch.equal(ms.scaled_mm(qa, qb), y)                  # auto on CPU = reference
    y_bf16 = ms.scaled_mm(qa, qb, out_dtype=torch.bfloat16)
    assert y_bf16.dtype == torch.bfloat16 and torch.equal(y_bf16, y.to(torch.bfloat16))


def test_nvfp4_alpha_is_spec_formula():
    x, w = _data(3, 16, 64) * 10, _data(4, 32, 64) * 1e-3
    qa, qb = ms.quantize(x, "nvfp4"), ms.quantize(w, "nvfp4")
    y = ms.scaled_mm(qa, qb).double()
    a, b = decode_f64(qa), decode_f64(qb)
    alpha = qa.amax.double() * qb.amax.double() / 7225344
    torch.testing.assert_close(y, torch.from_numpy(a @ b.T) * alpha, rtol=1e-5, atol=1e-9)
    # and the product of the dequantized operands is the same thing
    torch.testing.assert_close(y, qa.dequantize().double() @ qb.dequantize().double().t(),
                               rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("fmt, d", [("nvfp4", 16), ("mxfp4", 32)])
def test_rht_operands_reproduce_unrotated_product(fmt, d):
    x, w = _data(5, 64, 256), _data(6, 48, 256)
    qa, qb = ms.quantize(x, fmt, rht=True, rht_d=d), ms.quantize(w, fmt, rht=True, rht_d=d)
    assert qa.rht_d == qb.rht_d == d
    y_rht = ms.scaled_mm(qa, qb)
    # exact in the rotated domain ...
    torch.testing.assert_close(y_rht.double(), torch.from_numpy(oracle_mm(qa, qb)),
                               atol=8e-3, rtol=8e-3)
    # ... and the rotation cancels: as close to x wᵀ as the un-rotated quantized product
    # (rotating one operand only, or not undoing it, would give an error of order 1)
    exact = x.double() @ w.double().t()
    y_plain = ms.scaled_mm(ms.quantize(x, fmt), ms.quantize(w, fmt))
    err_rht = (y_rht.double() - exact).norm() / exact.norm()
    err_plain = (y_plain.double() - exact).norm() / exact.norm()
    assert err_rht < 0.2 and err_rht < 1.5 * err_plain, (err_rht, err_plain)


def test_scaled_mm_errors():
    qa = ms.quantize(_data(7, 16, 64), "nvfp4")
    with pytest.raises(ValueError, match="K=64.*K=32"):
        ms.scaled_mm(qa, ms.quantize(_data(8, 16, 32), "nvfp4"))
    with pytest.raises(ValueError, match="RHT mismatch"):
        ms.scaled_mm(qa, ms.quantize(_data(8, 16, 64), "nvfp4", rht=True))
    with pytest.raises(ValueError, match="2-D"):
        ms.scaled_mm(qa, ms.quantize(_data(8, 2, 16, 64), "nvfp4"))
    with pytest.raises(TypeError, match="QuantizedTensor"):
        ms.scaled_mm(qa, _data(8, 16, 64))
    with pytest.raises(ValueError, match="backend"):
        ms.scaled_mm(qa, qa, backend="cuda")
