"""Element casts (SPEC §1) against ml_dtypes: E2M1, E4M3, E5M2, UE8M0 and FP4 packing.

Every cast is checked on all 65536 bf16 bit patterns and on a 1e6-value fp32 sample spread
over many binades (fp8 subnormals included, half of it with the low mantissa bits cleared so
that exact ties are common). ml_dtypes is the oracle, with two adjustments the SPEC asks for:
it does not saturate, so its input is clamped to ±max first (the library's "satfinite"), and
NaN positions are compared separately (byte patterns of NaN are not unique).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

from microscale.formats import (
    E2M1_GRID, e2m1_decode, e2m1_encode, e2m1_stochastic_encode, e8m0_decode,
    e8m0_encode_exponent, fp8_cast_satfinite, pack_fp4, unpack_fp4,
)

FP8 = {  # torch dtype -> (ml_dtypes type, max finite)
    torch.float8_e4m3fn: (ml_dtypes.float8_e4m3fn, 448.0),
    torch.float8_e5m2: (ml_dtypes.float8_e5m2, 57344.0),
}


def _random_fp32(n: int, seed: int = 0) -> np.ndarray:
    """fp32 values with random sign, exponent in [-30, 20] (plus fp32 subnormals), mantissa."""
    rng = np.random.default_rng(seed)
    sign = rng.integers(0, 2, n, dtype=np.uint32) << 31
    exp = rng.integers(127 - 30, 127 + 21, n, dtype=np.uint32)
    exp[: n // 50] = 0                                   # fp32 subnormals
    mant = rng.integers(0, 1 << 23, n, dtype=np.uint32)
    mant[n // 2:] &= ~np.uint32((1 << 19) - 1)            # only 4 mantissa bits: many ties
    return (sign | (exp << 23) | mant).view(np.float32)


def _fp8_oracle_bytes(x32: np.ndarray, ml_type, fmax: float) -> np.ndarray:
    return np.clip(x32, -fmax, fmax).astype(ml_type).view(np.uint8)


def _e2m1_oracle_codes(x32: np.ndarray) -> np.ndarray:
    """ml_dtypes float4_e2m1fn codes of the input clamped to ±6 (ml_dtypes keeps -0's sign)."""
    return np.clip(x32, -6.0, 6.0).astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF


# --------------------------------------------------------------------------- E2M1
def test_e2m1_every_bf16(all_bf16):
    x32 = all_bf16.float().numpy()
    finite = ~np.isnan(x32)
    got = e2m1_encode(all_bf16).numpy()
    np.testing.assert_array_equal(got[finite], _e2m1_oracle_codes(x32[finite]))
    # NaN has no E2M1 code; the encoder documents it as the largest magnitude (callers reject NaN)
    assert np.all(got[~finite] & 7 == 7)


def test_e2m1_random_fp32():
    x32 = _random_fp32(1_000_000, seed=1) * np.float32(2.0 ** -8)  # centre on E2M1's range
    got = e2m1_encode(torch.from_numpy(x32)).numpy()
    np.testing.assert_array_equal(got, _e2m1_oracle_codes(x32))


@pytest.mark.parametrize("value, code", [
    (0.25, 0), (0.75, 2), (1.25, 2), (1.75, 4), (2.5, 4), (3.5, 6), (5.0, 6),     # SPEC ties
    (0.2500001, 1), (0.7499999, 1), (5.0000005, 7), (4.9999995, 6),               # just off
    (6.0, 7), (7.0, 7), (1e30, 7), (float("inf"), 7),                               # saturation
    (0.0, 0), (1e-40, 0), (0.5, 1), (3.0, 5),
])
def test_e2m1_ties_and_saturation(value, code):
    x = torch.tensor([value, -value], dtype=torch.float32)
    assert e2m1_encode(x).tolist() == [code, code | 8]


def test_e2m1_negative_zero_keeps_sign():
    x = torch.tensor([-0.0, 0.0, -0.25, -1e-30, 0.25])
    assert e2m1_encode(x).tolist() == [8, 0, 8, 8, 0]
    dec = e2m1_decode(torch.tensor([0, 8], dtype=torch.uint8))
    assert dec.tolist() == [0.0, 0.0]


def test_e2m1_decode_all_codes():
    codes = torch.arange(16, dtype=torch.uint8)
    expected = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    np.testing.assert_array_equal(e2m1_decode(codes).numpy(), expected)
    assert E2M1_GRID == (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
    # encode(decode(c)) == c for every code (-0 included)
    assert torch.equal(e2m1_encode(e2m1_decode(codes)), codes)


def test_e2m1_stochastic_grid_values_never_move():
    grid = torch.tensor(E2M1_GRID)
    y = torch.cat([grid, -grid]).repeat(256, 1)
    bits = torch.arange(256, dtype=torch.uint8)[:, None].expand_as(y).contiguous()
    assert torch.equal(e2m1_stochastic_encode(y, bits), e2m1_encode(y))


def test_e2m1_stochastic_probabilities_exact():
    # With all 256 byte values, P(round up) is exactly (#r with r/256 >= 1 - frac)/256.
    y = torch.tensor([0.125, 0.3, 1.8, 2.25, 3.75, 5.0, 5.5, -0.375, -4.5])
    bits = torch.arange(256, dtype=torch.uint8)[:, None].expand(256, len(y)).contiguous()
    q = e2m1_decode(e2m1_stochastic_encode(y.expand(256, -1).contiguous(), bits)).double()
    lo = torch.tensor([0, 0, 1.5, 2, 3, 4, 4, 0, 4], dtype=torch.float64) * torch.sign(y.double())
    step = torch.tensor([.5, .5, .5, 1, 1, 2, 2, .5, 2], dtype=torch.float64)
    frac = (y.double().abs() - lo.abs()) / step
    p_up = torch.floor(frac * 256) / 256  # #{r in 0..255 : r >= 256 (1 - frac)} = floor(256 frac)
    up = (q.abs() > lo.abs()).double().mean(0)
    torch.testing.assert_close(up, p_up, rtol=0, atol=0)
    assert torch.all((q.abs() == lo.abs()) | (q.abs() == lo.abs() + step))


# --------------------------------------------------------------------------- FP8
@pytest.mark.parametrize("fp8_dtype", list(FP8))
def test_fp8_every_bf16(all_bf16, fp8_dtype):
    ml_type, fmax = FP8[fp8_dtype]
    x32 = all_bf16.float().numpy()
    got = fp8_cast_satfinite(all_bf16, fp8_dtype)
    nan = np.isnan(x32)
    np.testing.assert_array_equal(torch.isnan(got.float()).numpy(), nan)
    np.testing.assert_array_equal(got.view(torch.uint8).numpy()[~nan],
                                  _fp8_oracle_bytes(x32[~nan], ml_type, fmax))


@pytest.mark.parametrize("fp8_dtype", list(FP8))
def test_fp8_random_fp32(fp8_dtype):
    ml_type, fmax = FP8[fp8_dtype]
    x32 = _random_fp32(1_000_000, seed=2)
    got = fp8_cast_satfinite(torch.from_numpy(x32), fp8_dtype).view(torch.uint8).numpy()
    np.testing.assert_array_equal(got, _fp8_oracle_bytes(x32, ml_type, fmax))


@pytest.mark.parametrize("in_dtype", [torch.float16, torch.bfloat16])
def test_fp8_low_precision_inputs(in_dtype):
    x = torch.from_numpy(_random_fp32(20_000, seed=3)).clamp(-6e4, 6e4).to(in_dtype)
    for fp8_dtype, (ml_type, fmax) in FP8.items():
        got = fp8_cast_satfinite(x, fp8_dtype).view(torch.uint8).numpy()
        np.testing.assert_array_equal(got, _fp8_oracle_bytes(x.float().numpy(), ml_type, fmax))


@pytest.mark.parametrize("fp8_dtype, cases", [
    (torch.float8_e4m3fn, [(448, 448), (464, 448), (1e10, 448), (float("inf"), 448),
                           (2.0 ** -9, 2.0 ** -9), (2.0 ** -10, 0.0), (1.5 * 2 ** -10, 2 ** -9),
                           (17.0, 16.0), (19.0, 20.0), (0.0, 0.0)]),
    (torch.float8_e5m2, [(57344, 57344), (61440, 57344), (float("inf"), 57344),
                         (2.0 ** -16, 2.0 ** -16), (2.0 ** -17, 0.0), (4.5, 4.0), (5.5, 6.0)]),
])
def test_fp8_saturation_subnormals_ties(fp8_dtype, cases):
    x = torch.tensor([c[0] for c in cases] + [-c[0] for c in cases], dtype=torch.float32)
    want = torch.tensor([c[1] for c in cases] + [-c[1] for c in cases], dtype=torch.float32)
    got = fp8_cast_satfinite(x, fp8_dtype).float()
    assert torch.equal(got, want)
    assert torch.equal(torch.signbit(got), torch.signbit(x))  # -0 keeps its sign
    assert torch.isnan(fp8_cast_satfinite(torch.tensor([float("nan")]), fp8_dtype).float()).all()


def test_fp8_cast_rejects_non_fp8_dtype():
    with pytest.raises(TypeError, match="float8"):
        fp8_cast_satfinite(torch.ones(2), torch.float16)


# --------------------------------------------------------------------------- UE8M0
def test_e8m0_decode_all_bytes():
    b = np.arange(256, dtype=np.uint8)
    want = b.view(ml_dtypes.float8_e8m0fnu).astype(np.float32)
    got = e8m0_decode(torch.from_numpy(b)).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[:255], want[:255])
    assert np.isnan(got[255]) and got[0] == np.float32(2.0 ** -127)


def test_e8m0_encode_exponents():
    k = torch.arange(-127, 128, dtype=torch.int32)
    pow2 = np.ldexp(np.float32(1), k.numpy()).astype(np.float32)
    want = pow2.astype(ml_dtypes.float8_e8m0fnu).view(np.uint8)
    np.testing.assert_array_equal(e8m0_encode_exponent(k).numpy(), want)
    # out-of-range exponents clamp instead of wrapping
    assert e8m0_encode_exponent(torch.tensor([-300, -128, 128, 1000])).tolist() == [0, 0, 254, 254]


def test_e8m0_every_bf16_power_of_two(all_bf16):
    """floor(log2 v) of every positive finite bf16 value, encoded, equals ml_dtypes' byte."""
    x32 = all_bf16.float().numpy()
    pos = np.isfinite(x32) & (x32 > 0)
    _, e = np.frexp(x32[pos].astype(np.float64))
    k = e - 1                                            # v in [2^k, 2^(k+1))
    tiny = k < -127                                      # bf16 subnormals below UE8M0's range
    assert e8m0_encode_exponent(torch.from_numpy(k[tiny].astype(np.int32))).eq(0).all()
    k = k[~tiny]
    want = np.ldexp(np.float32(1), k).astype(np.float32).astype(ml_dtypes.float8_e8m0fnu)
    got = e8m0_encode_exponent(torch.from_numpy(k.astype(np.int32)))
    np.testing.assert_array_equal(got.numpy(), want.view(np.uint8))
    np.testing.assert_array_equal(e8m0_decode(got).numpy(), np.ldexp(np.float32(1), k))


# --------------------------------------------------------------------------- packing
def test_pack_layout_and_round_trip(gen):
    codes = torch.tensor([[1, 2, 15, 0, 8, 7]], dtype=torch.uint8)
    assert pack_fp4(codes).tolist() == [[0x21, 0x0F, 0x78]]   # element 2j in the low nibble
    many = torch.randint(0, 16, (3, 5, 64), generator=gen, dtype=torch.uint8)
    packed = pack_fp4(many)
    assert packed.shape == (3, 5, 32) and packed.dtype == torch.uint8
    assert torch.equal(unpack_fp4(packed), many)
    all_bytes = torch.arange(256, dtype=torch.uint8)
    assert torch.equal(pack_fp4(unpack_fp4(all_bytes)), all_bytes)


def test_pack_errors():
    with pytest.raises(ValueError, match="even"):
        pack_fp4(torch.zeros(3, dtype=torch.uint8))
    with pytest.raises(TypeError, match="uint8"):
        pack_fp4(torch.zeros(4, dtype=torch.int32))
    with pytest.raises(TypeError, match="uint8"):
        unpack_fp4(torch.zeros(4, dtype=torch.int8))
    with pytest.raises(TypeError, match="uint8"):
        e2m1_decode(torch.zeros(4, dtype=torch.int64))
    with pytest.raises(TypeError, match="uint8"):
        e8m0_decode(torch.zeros(4, dtype=torch.int32))
