"""MX quantizers (SPEC §7): MXFP8 E4M3/E5M2 and MXFP4, ceil and floor scales, vs a numpy oracle.

The oracle is a per-block Python loop written from the SPEC: the block exponent ``k`` is found
by exact float64 search (smallest ``2^k`` with ``vmax / 2^k <= elem_max`` for ceil; ``floor(log2
vmax) - emax`` for floor), elements are ``x / 2^k`` in fp32, then ml_dtypes' RNE cast (input
clamped to ±max: satfinite) for FP8 or a nearest-grid search with ties to the even code for
E2M1. Scale bytes, element bytes/codes and amax must match the library exactly.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import microscale as ms
from e2m1_oracle import GRID, e2m1_nearest, e2m1_sr  # noqa: F401  (tests/ is on sys.path)
from microscale.quant.mx import mx_scale_exponent

F32 = np.float32
ELEM = {  # fmt -> (elem_max, emax, ml_dtypes type or None for E2M1)
    "mxfp8_e4m3": (448.0, 8, ml_dtypes.float8_e4m3fn),
    "mxfp8_e5m2": (57344.0, 15, ml_dtypes.float8_e5m2),
    "mxfp4": (6.0, 2, None),
}


# --------------------------------------------------------------------------- the oracle
def block_exponent(vmax: float, elem_max: float, emax: int, mode: str) -> int:
    if vmax == 0:
        return -127
    if mode == "floor":
        k = math.frexp(vmax)[1] - 1 - emax
    else:
        k = -200
        while vmax / 2.0 ** k > elem_max:   # float64: exact for these powers of two
            k += 1
    return max(-127, min(127, k))


def mx_oracle(x: torch.Tensor, fmt: str, mode: str = "ceil", rand_bits=None):
    """(element bytes or E2M1 codes uint8 [rows, cols], scale bytes uint8 [rows, cols/32], amax)."""
    elem_max, emax, ml_type = ELEM[fmt]
    x2 = x.float().numpy().reshape(-1, x.shape[-1]).astype(F32)
    rows, cols = x2.shape
    out = np.zeros((rows, cols), np.uint8)
    scales = np.zeros((rows, cols // 32), np.uint8)
    for r in range(rows):
        for b in range(cols // 32):
            blk = x2[r, b * 32:(b + 1) * 32]
            k = block_exponent(float(np.max(np.abs(blk))), elem_max, emax, mode)
            scales[r, b] = k + 127
            y = (blk / F32(2.0 ** k)).astype(F32)                  # one fp32 rounding at most
            y = np.clip(y, -elem_max, elem_max)
            if ml_type is None and rand_bits is not None:
                out[r, b * 32:(b + 1) * 32] = [e2m1_sr(v, int(rand_bits[r, b * 32 + i]))
                                               for i, v in enumerate(y)]
            elif ml_type is None:
                out[r, b * 32:(b + 1) * 32] = [e2m1_nearest(v) for v in y]
            else:
                out[r, b * 32:(b + 1) * 32] = y.astype(ml_type).view(np.uint8)
    return out, scales, F32(np.max(np.abs(x2)))


def lib_parts(q):
    if q.fmt.is_fp4:
        elems = ms.unpack_fp4(q.data).numpy()
    else:
        elems = q.data.view(torch.uint8).numpy()
    return elems, q.scale.numpy(), F32(q.amax.item())


def _randn(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    blocks = torch.exp2(torch.randint(-20, 20, (*shape[:-1], shape[-1] // 32, 1), generator=g).float())
    return (torch.randn(shape, generator=g) * blocks.expand(*shape[:-1], shape[-1] // 32, 32)
            .reshape(shape)).to(dtype)


# --------------------------------------------------------------------------- exactness
@pytest.mark.parametrize("fmt", list(ELEM))
@pytest.mark.parametrize("mode", ["ceil", "floor"])
@pytest.mark.parametrize("shape, dtype", [
    ((3, 64), torch.float32), ((2, 2, 96), torch.bfloat16), ((4, 32), torch.float16),
])
def test_matches_oracle(fmt, mode, shape, dtype):
    x = _randn(shape, dtype, seed=shape[-1] + len(shape))
    q = ms.quantize(x, fmt, scale_rounding=mode, backend="reference")
    assert q.block == (1, 32) and q.scale.dtype == torch.uint8 and q.shape == x.shape
    assert q.data.shape == (x.numel() // shape[-1], shape[-1] // (2 if fmt == "mxfp4" else 1))
    elems, scales, amax = lib_parts(q)
    w_elems, w_scales, w_amax = mx_oracle(x, fmt, mode)
    np.testing.assert_array_equal(scales, w_scales)
    np.testing.assert_array_equal(elems, w_elems)
    assert amax.tobytes() == w_amax.tobytes()


@pytest.mark.parametrize("fmt", list(ELEM))
def test_ceil_exact_at_elem_max_times_pow2(fmt):
    """vmax = elem_max·2^k keeps k (nothing saturates); one fp32 ulp above needs k + 1."""
    elem_max, emax, _ = ELEM[fmt]
    ks = [-120, -30, -1, 0, 1, 7, 40, 100]
    rows = []
    for k in ks:
        v = F32(elem_max * 2.0 ** k)
        for top in (v, np.nextafter(v, F32(np.inf)), np.nextafter(v, F32(0))):
            row = np.full(32, F32(elem_max * 2.0 ** (k - 3)), F32)
            row[5] = top
            rows.append(row)
    x = torch.from_numpy(np.stack(rows))
    q = ms.quantize(x, fmt)
    got_k = q.scale.numpy()[:, 0].astype(int) - 127
    want_k = np.array([[k, k + 1, k] for k in ks]).ravel()
    np.testing.assert_array_equal(got_k, want_k)
    # at exactly elem_max·2^k the top element is elem_max itself (max code), no saturation
    deq = q.dequantize()
    np.testing.assert_array_equal(deq[0::3, 5].numpy(), x[0::3, 5].numpy())
    np.testing.assert_array_equal(lib_parts(q)[0], mx_oracle(x, fmt)[0])


@pytest.mark.parametrize("fmt", list(ELEM))
def test_floor_mode_saturates(fmt):
    elem_max, emax, _ = ELEM[fmt]
    x = torch.zeros(1, 32)
    x[0, 0] = 1.9 * 2.0 ** emax       # floor: k = 0, 1.9·2^emax > elem_max -> saturates
    q = ms.quantize(x, fmt, scale_rounding="floor")
    assert q.scale.item() == 127
    assert q.dequantize()[0, 0].item() == elem_max
    q_ceil = ms.quantize(x, fmt)
    assert q_ceil.scale.item() == 128


def test_scale_exponent_edge_cases():
    v = torch.tensor([0.0, 2.0 ** -149, 3.0e38, 1.0])
    for fmt, (elem_max, emax, _) in ELEM.items():
        elem = ms.formats.ELEM_FORMATS[{"mxfp8_e4m3": "e4m3", "mxfp8_e5m2": "e5m2",
                                         "mxfp4": "e2m1"}[fmt]]
        for mode in ("ceil", "floor"):
            want = [block_exponent(float(t), elem_max, emax, mode) for t in v]
            assert mx_scale_exponent(v, elem, mode).tolist() == want
    # vmax = 0 -> byte 0; an all-zero block decodes to zeros
    q = ms.quantize(torch.zeros(2, 64), "mxfp8_e4m3")
    assert q.scale.eq(0).all() and q.dequantize().eq(0).all()


def test_mxfp4_sr_and_rht_match_oracle(gen):
    x = _randn((2, 64), torch.bfloat16, seed=4)
    bits = torch.randint(0, 256, (2, 64), generator=gen, dtype=torch.uint8)
    q = ms.quantize(x, "mxfp4", stochastic=True, rand_bits=bits)
    np.testing.assert_array_equal(lib_parts(q)[0], mx_oracle(x, "mxfp4", rand_bits=bits.numpy())[0])
    q_rne = ms.quantize(x, "mxfp4")
    codes, codes_rne = ms.unpack_fp4(q.data).long(), ms.unpack_fp4(q_rne.data).long()
    assert torch.equal(q.scale, q_rne.scale)
    # SR lands on one of the two grid neighbours of y = x/2^k (codes differ by <= 1 magnitude)
    assert torch.all((codes & 7) - (codes_rne & 7) <= 1) and torch.all((codes_rne & 7) - (codes & 7) <= 1)
    q_again = ms.quantize(x, "mxfp4", stochastic=True, rand_bits=bits)
    assert torch.equal(q.data, q_again.data)
    # 32-point RHT (size 32 by default for MX): amax, scales and codes are those of rht(x)
    q_rht = ms.quantize(x, "mxfp4", rht=True)
    assert q_rht.rht_d == 32
    y = ms.rht(x, 32)
    assert y.dtype == x.dtype
    for got, want in zip(lib_parts(q_rht), mx_oracle(y, "mxfp4")):
        np.testing.assert_array_equal(got, want)
    torch.testing.assert_close(q_rht.dequantize(undo_rht=False), ms.quantize(y, "mxfp4").dequantize())


# --------------------------------------------------------------------------- error bounds
def _check_mx_bound(x: torch.Tensor, fmt: str):
    elem_max, emax, _ = ELEM[fmt]
    q = ms.quantize(x, fmt)
    x64 = x.double().reshape(q.rows, -1)
    scale = (2.0 ** (q.scale.double() - 127)).repeat_interleave(32, 1)
    vmax = x64.abs().reshape(q.rows, -1, 32).amax(-1).repeat_interleave(32, 1)
    live = vmax > 0
    # ceil: the smallest 2^k that fits, so vmax/2^k lies in (elem_max/2, elem_max]
    ratio = vmax[live] / scale[live]
    assert torch.all(ratio <= elem_max) and torch.all(ratio > elem_max / 2)
    y = x64.abs() / scale
    err = (q.dequantize().double().reshape(q.rows, -1) - x64).abs()
    if fmt == "mxfp4":
        bound = torch.where(y < 2, 0.25, torch.where(y < 4, 0.5, 1.0)) * scale
    else:  # RNE to 3 (E4M3) / 2 (E5M2) mantissa bits: 2^-4 / 2^-3 relative, subnormals absolute
        mbits, min_normal = (3, 2.0 ** -6) if fmt == "mxfp8_e4m3" else (2, 2.0 ** -14)
        bound = torch.maximum(y * 2.0 ** -(mbits + 1), torch.tensor(min_normal * 2.0 ** -(mbits + 1)))
        bound = bound * scale
    assert torch.all(err <= bound * (1 + 1e-6)), (err / bound).max()


@given(fmt=st.sampled_from(list(ELEM)), rows=st.integers(1, 3), nblk=st.integers(1, 3),
       seed=st.integers(0, 2**31), log_scale=st.integers(-60, 60))
def test_mx_error_bound_property(fmt, rows, nblk, seed, log_scale):
    x = _randn((rows, 32 * nblk), torch.float32, seed) * 2.0 ** log_scale
    _check_mx_bound(x, fmt)
