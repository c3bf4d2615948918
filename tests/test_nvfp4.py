"""NVFP4 quantizer (SPEC §2, §3, §5) against an independent per-block numpy oracle.

The oracle below is written from the SPEC text alone: a slow Python loop over blocks, numpy
float32 scalars for every scale operation (``np.float32`` arithmetic is IEEE fp32 RNE),
ml_dtypes for the E4M3 scale cast, and a direct grid search (nearest grid value, ties to the
even code) for E2M1. Codes, scale bytes and amax must match the library bit for bit.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import microscale as ms
from e2m1_oracle import GRID, e2m1_nearest, e2m1_sr  # noqa: F401  (tests/ is on sys.path)

F32 = np.float32
FLT_MAX = F32(3.4028235e38)
SIGNS_16 = np.array([1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1], dtype=np.float64)


# --------------------------------------------------------------------------- the oracle


def oracle_rht(x2: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """SPEC §4 rotation of 16-chunks (exact for the small-integer inputs the tests use)."""
    h = np.array([[(-1) ** bin(i & j).count("1") for j in range(16)] for i in range(16)], float)
    m = SIGNS_16[:, None] * h / 4.0
    y = (x2.astype(np.float64).reshape(-1, 16) @ m).reshape(x2.shape).astype(F32)
    low = {torch.bfloat16: ml_dtypes.bfloat16, torch.float16: np.float16}.get(dtype, F32)
    return y.astype(low).astype(F32)                 # rounded to the input dtype (RNE)


def nvfp4_oracle(x: torch.Tensor, block_2d=False, rht=False, rand_bits=None):
    """(codes uint8 [rows, cols], scale bytes uint8 [rows, cols/16], amax fp32)."""
    x2 = x.float().numpy().reshape(-1, x.shape[-1]).astype(F32)
    if rht:
        x2 = oracle_rht(x2, x.dtype)
    rows, cols = x2.shape
    amax = F32(np.max(np.abs(x2)))
    with np.errstate(divide="ignore"):
        s_enc = min(F32(F32(2688) / amax), FLT_MAX)
    if s_enc == 0:
        s_enc = F32(1)
    s_dec = F32(F32(1) / s_enc)
    enc_factor = F32(s_enc * F32(F32(1) / F32(6)))
    codes = np.zeros((rows, cols), np.uint8)
    scales = np.zeros((rows, cols // 16), np.uint8)
    for r in range(rows):
        for b in range(cols // 16):
            r0 = (r // 16) * 16 if block_2d else r
            tile = x2[r0:r0 + 16, b * 16:(b + 1) * 16] if block_2d else x2[r, b * 16:(b + 1) * 16]
            s_b = F32(F32(np.max(np.abs(tile))) * enc_factor)
            s_b = F32(np.clip(min(s_b, FLT_MAX), -448, 448))
            byte = np.array([s_b], F32).astype(ml_dtypes.float8_e4m3fn)
            scales[r, b] = byte.view(np.uint8)[0]
            with np.errstate(divide="ignore"):
                enc = min(F32(F32(1) / F32(byte.astype(F32)[0] * s_dec)), FLT_MAX)
            for i in range(16):
                c = b * 16 + i
                y = F32(np.clip(F32(x2[r, c] * enc), F32(-6), F32(6)))
                codes[r, c] = (e2m1_nearest(y) if rand_bits is None
                               else e2m1_sr(y, int(rand_bits[r, c])))
    return codes, scales, amax


def lib_parts(q):
    codes = ms.unpack_fp4(q.data).numpy()
    return codes, q.scale.view(torch.uint8).numpy(), F32(q.amax.item())


def assert_matches_oracle(q, want):
    codes, scales, amax = lib_parts(q)
    np.testing.assert_array_equal(scales, want[1], err_msg="scale bytes")
    np.testing.assert_array_equal(codes, want[0], err_msg="codes")
    assert amax.tobytes() == want[2].tobytes()


def _randn(shape, dtype, seed, spread=True):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    if spread:  # blocks of very different magnitude exercise small and subnormal E4M3 scales
        x = x * torch.exp2(torch.randint(-12, 6, (*shape[:-1], shape[-1] // 16, 1), generator=g)
                           .float()).repeat_interleave(16, -1).reshape(shape)
    return x.to(dtype)


# --------------------------------------------------------------------------- exactness
@pytest.mark.parametrize("shape, dtype", [
    ((4, 64), torch.float32), ((2, 3, 48), torch.bfloat16), ((5, 16), torch.float16),
    ((1, 160), torch.float32),
])
def test_rne_1x16_matches_oracle(shape, dtype):
    x = _randn(shape, dtype, seed=sum(shape))
    q = ms.quantize(x, "nvfp4", backend="reference")
    assert q.data.shape == (x.numel() // shape[-1], shape[-1] // 2) and q.data.dtype == torch.uint8
    assert q.scale.dtype == torch.float8_e4m3fn and q.amax.dim() == 0 and q.shape == x.shape
    assert_matches_oracle(q, nvfp4_oracle(x))


@pytest.mark.parametrize("shape, dtype", [((32, 48), torch.float32), ((2, 16, 32), torch.bfloat16)])
def test_rne_2d_matches_oracle(shape, dtype):
    x = _randn(shape, dtype, seed=7)
    q = ms.quantize(x, "nvfp4", block_2d=True, backend="reference")
    assert q.block == (16, 16)
    assert_matches_oracle(q, nvfp4_oracle(x, block_2d=True))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_sr_with_given_bits_matches_oracle(dtype, gen):
    x = _randn((3, 64), dtype, seed=11)
    bits = torch.randint(0, 256, (3, 64), generator=gen, dtype=torch.uint8)
    q = ms.quantize(x, "nvfp4", stochastic=True, rand_bits=bits, backend="reference")
    assert_matches_oracle(q, nvfp4_oracle(x, rand_bits=bits.numpy()))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_rht_matches_oracle(dtype, gen):
    # small multiples of 1/8: every rotated value is exact in fp32, whatever the summation order
    x = (torch.randint(-64, 65, (2, 4, 32), generator=gen).float() / 8).to(dtype)
    q = ms.quantize(x, "nvfp4", rht=True, backend="reference")
    assert q.rht_d == 16
    assert_matches_oracle(q, nvfp4_oracle(x, rht=True))


def test_spec_worked_example():
    x = torch.tensor([0, .25, .5, .75, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, -2.5])
    q = ms.quantize(x[None], "nvfp4", backend="reference")
    assert q.scale.view(torch.uint8).tolist() == [[0x7E]]
    assert ms.unpack_fp4(q.data).tolist() == [[0, 0, 1, 2, 2, 2, 3, 4, 4, 4, 5, 6, 6, 6, 7, 12]]
    assert q.data.tolist() == [[0x00, 0x21, 0x22, 0x43, 0x44, 0x65, 0x66, 0xC7]]
    assert q.amax.item() == 6.0
    assert_matches_oracle(q, nvfp4_oracle(x[None]))


def test_global_scales_are_one_ieee_division():
    """S_enc = fp32(2688 / amax): one correctly rounded division, not reciprocal·2688."""
    from microscale.quant.nvfp4 import nvfp4_global_scales
    rng = np.random.default_rng(0)
    amax = np.concatenate([(2.0 ** rng.uniform(-40, 40, 100_000)).astype(F32),
                           np.array([0, np.inf, 1e-38, 6, 2688], F32)])
    with np.errstate(divide="ignore", over="ignore"):
        want = np.minimum(F32(2688) / amax, FLT_MAX)
    want[want == 0] = 1
    s_enc, s_dec = nvfp4_global_scales(torch.from_numpy(amax))
    np.testing.assert_array_equal(s_enc.numpy(), want)
    np.testing.assert_array_equal(s_dec.numpy(), F32(1) / want)


@pytest.mark.parametrize("row", [
    # amax such that reciprocal(amax)·2688 is one ulp off 2688/amax, and a block max whose
    # E4M3 scale sits next to a rounding tie: the scale byte tells the two apart.
    [61.056942] + [0.0] * 15 + [22.896355] + [1.0] * 15,
    # elements that land on E2M1 ties with enc_b = 1/(scale·S_dec) but not with the
    # algebraically equal (1/scale)·S_enc: the codes tell the two orders apart.
    [95.09591] + [0.0] * 15 + [87.01449, 3.679306, 11.037917, 18.39653, 25.75514, 36.79306,
                               51.51028, 73.58612] + [-3.679306] * 8,
])
def test_scale_arithmetic_order_is_spec(row):
    x = torch.tensor([row])
    q = ms.quantize(x, "nvfp4", backend="reference")
    assert_matches_oracle(q, nvfp4_oracle(x))


def test_zero_and_negative_zero_and_given_amax():
    q = ms.quantize(torch.zeros(2, 32), "nvfp4", backend="reference")
    assert q.data.eq(0).all() and q.scale.view(torch.uint8).eq(0).all() and q.amax.item() == 0
    x = torch.tensor([[-0.0] * 16 + [1.0] * 16])
    assert ms.unpack_fp4(ms.quantize(x, "nvfp4").data)[0, :16].eq(8).all()
    # a caller-supplied amax replaces the measured one (delayed/shared amax)
    x = _randn((2, 32), torch.float32, seed=3, spread=False)
    amax = torch.tensor(x.abs().max().item() * 3)
    q = ms.quantize(x, "nvfp4", amax=amax, backend="reference")
    assert q.amax.item() == amax.item()
    s_b = q.scale.float().max().item()
    assert 140 < s_b < 160  # block maxima now map to ~448/3


def test_inf_with_check_finite_false_uses_unit_s_enc():
    x = torch.ones(1, 32)
    x[0, 3] = float("inf")
    q = ms.quantize(x, "nvfp4", check_finite=False, backend="reference")
    assert q.amax.item() == float("inf")
    # S_enc = 1: block 0 scale = clamp(inf/6) = 448; block 1 scale = e4m3(1/6)
    want_b1 = np.array([F32(1) * F32(F32(1) / F32(6))], F32).astype(ml_dtypes.float8_e4m3fn)
    assert q.scale.view(torch.uint8)[0].tolist() == [0x7E, int(want_b1.view(np.uint8)[0])]
    codes = ms.unpack_fp4(q.data)[0]
    assert codes[3] == 7 and codes[16:].eq(7).all()  # 1 / e4m3(1/6) = 5.82 rounds to 6
    assert codes[:16].tolist() == [0, 0, 0, 7] + [0] * 12  # 1/448 rounds to 0


# --------------------------------------------------------------------------- 2D transpose
@pytest.mark.parametrize("shape", [(32, 48), (16, 16), (64, 32)])
def test_2d_transpose_equals_quantized_transpose(shape):
    x = _randn(shape, torch.bfloat16, seed=5)
    q_t = ms.quantize(x, "nvfp4", block_2d=True).t()
    q_of_t = ms.quantize(x.t().contiguous(), "nvfp4", block_2d=True)
    assert q_t.shape == q_of_t.shape == (shape[1], shape[0])
    assert torch.equal(q_t.data, q_of_t.data)
    assert torch.equal(q_t.scale.view(torch.uint8), q_of_t.scale.view(torch.uint8))
    assert torch.equal(q_t.amax, q_of_t.amax)
    assert torch.equal(q_t.dequantize(), q_of_t.dequantize())


def test_1x16_and_rotated_transposes_are_refused():
    with pytest.raises(ValueError, match="re-quantize"):
        ms.quantize(torch.ones(16, 32), "nvfp4").t()
    # a rotated tensor's transpose would keep rht_d but rotate along the wrong dimension
    with pytest.raises(ValueError, match="RHT"):
        ms.quantize(torch.ones(16, 32), "nvfp4", block_2d=True, rht=True).t()


# --------------------------------------------------------------------------- SR statistics
def _sr_rows():
    """Two blocks built so that y = x·enc is exact and sits on the 1/256-of-a-step lattice.

    Block 0 holds the amax 5.25, so S_enc = 2688/5.25 = 512 and S_dec = 2^-9 exactly. Block 1
    has max 3: s_b = 3·fp32(512·fp32(1/6)) = 256.00001 -> scale 256, enc_b = 1/(256·2^-9) = 2.
    Its y = 2x are grid points plus j/256 of a step, so the exact SR expectation equals y.
    """
    lo = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 0.0, 2.0, 1.0, 4.0, 0.5, 3.0, 1.5, 0.0])
    step = torch.where(lo < 2, 0.5, torch.where(lo < 4, 1.0, 2.0))
    j = torch.tensor([37, 128, 1, 255, 200, 77, 150, 3, 64, 190, 12, 99, 222, 160, 250.0])
    sign = torch.tensor([1, 1, -1, 1, 1, -1, 1, 1, -1, 1, 1, 1, -1, 1, -1.0])
    y = torch.cat([torch.tensor([6.0]), sign * (lo + step * j / 256)])
    x = torch.cat([torch.tensor([5.25] + [0.0] * 15), y / 2])
    return x, y


def _enc(q):
    """SPEC §2 steps 2 and 4 in fp32, from the stored amax and scale bytes."""
    s_enc = torch.tensor(2688.0) / q.amax.float()
    s_dec = 1.0 / s_enc
    return (1.0 / (q.scale.float() * s_dec)).double()


def test_sr_mean_converges_and_variance_exceeds_rne():
    x, y = _sr_rows()
    xs = x.expand(4096, 32).contiguous()
    q_rne = ms.quantize(xs[:1], "nvfp4")
    assert q_rne.scale.float().tolist() == [[448.0, 256.0]] and _enc(q_rne)[0, 1] == 2.0
    y = y.double()
    step = torch.where(y.abs() < 2, 0.5, torch.where(y.abs() < 4, 1.0, 2.0)).double()
    vals = []
    for seed in range(32):                                    # different generator seeds
        g = torch.Generator().manual_seed(seed)
        q = ms.quantize(xs, "nvfp4", stochastic=True, generator=g)
        vals.append(ms.formats.e2m1_decode(ms.unpack_fp4(q.data)[:, 16:]).double())
    vals = torch.cat(vals)                                    # [32·4096, 16]
    n = vals.shape[0]
    bias = (vals.mean(0) - y) / step                          # in units of a grid step
    noise = vals.std(0) / step / n ** 0.5
    assert torch.all(bias.abs() <= 5 * noise + 1e-12), bias
    # pooled over the block the resolution is ~1/2800 step: the bias is well below 1/256
    pooled, pooled_noise = bias.mean(), noise.norm() / len(noise)
    assert pooled.abs() <= 5 * pooled_noise and 5 * pooled_noise < 1 / 512, (pooled, pooled_noise)
    rne_vals = ms.formats.e2m1_decode(ms.unpack_fp4(q_rne.data))[0, 16:].double()
    err_sr = ((vals - y) ** 2).mean()
    err_rne = ((rne_vals - y) ** 2).mean()
    assert err_sr > 1.5 * err_rne


def test_sr_mean_exact_over_all_bytes():
    # Enumerating all 256 bytes gives the exact SR expectation: within 1/256 step of y.
    x = _randn((1, 16), torch.float32, seed=9, spread=False)
    bits = torch.arange(256, dtype=torch.uint8)[:, None].expand(256, 16).contiguous()
    xs = x.expand(256, 16).contiguous()
    q = ms.quantize(xs, "nvfp4", stochastic=True, rand_bits=bits, amax=x.abs().max())
    y = (x.double() * _enc(q)[:1].repeat_interleave(16, 1)).clamp(-6, 6)[0]
    step = torch.where(y.abs() < 2, 0.5, torch.where(y.abs() < 4, 1.0, 2.0)).double()
    mean = ms.formats.e2m1_decode(ms.unpack_fp4(q.data)).double().mean(0)
    assert torch.all((y - mean) * torch.sign(y) >= -1e-6 * step)   # truncation: toward zero
    assert torch.all((y - mean).abs() <= step / 256 + 1e-6)


def test_sr_seed_determinism_and_representable_values():
    x = _randn((8, 64), torch.bfloat16, seed=2)
    a = ms.quantize(x, "nvfp4", stochastic=True, generator=torch.Generator().manual_seed(7))
    b = ms.quantize(x, "nvfp4", stochastic=True, generator=torch.Generator().manual_seed(7))
    c = ms.quantize(x, "nvfp4", stochastic=True, generator=torch.Generator().manual_seed(8))
    assert torch.equal(a.data, b.data) and not torch.equal(a.data, c.data)
    assert torch.equal(a.scale.view(torch.uint8), c.scale.view(torch.uint8))
    # grid values (block max 6 → scale 448, S_enc 448) keep their code for every random byte
    grid = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6, -6, -4, -3, -2, -1.5, -1, -.5, -0.0])
    xs = grid.expand(256, 16).contiguous()
    bits = torch.arange(256, dtype=torch.uint8)[:, None].expand(256, 16).contiguous()
    q_sr = ms.quantize(xs, "nvfp4", stochastic=True, rand_bits=bits)
    q_rne = ms.quantize(xs, "nvfp4")
    assert torch.equal(q_sr.data, q_rne.data)
    assert torch.equal(ms.unpack_fp4(q_rne.data)[0], ms.formats.e2m1_encode(grid))


# --------------------------------------------------------------------------- error bounds
def _check_nvfp4_bound(x: torch.Tensor, block_2d: bool):
    q = ms.quantize(x, "nvfp4", block_2d=block_2d)
    x64 = x.double().reshape(q.rows, -1)
    err = (q.dequantize().double().reshape(q.rows, -1) - x64).abs()
    amax = x64.abs().max()
    s_dec = (1.0 / (torch.tensor(2688.0) / amax.float())).double()   # SPEC §2 step 2, fp32
    d = (q.scale.double() * s_dec).repeat_interleave(16, 1)    # block's dequant scale
    vmax = x64.abs().reshape(q.rows, -1, 16).amax(-1)
    if block_2d:
        vmax = vmax.reshape(-1, 16, vmax.shape[1]).amax(1).repeat_interleave(16, 0)
    # scale: e4m3 RNE of vmax·S_enc/6 -> within 2^-4 relative (normal) or 2^-10 absolute
    ideal = vmax * (2688.0 / amax) / 6
    s_err = (q.scale.double() - ideal.clamp(max=448)).abs()
    assert torch.all(s_err <= torch.maximum(ideal * 2.0 ** -4, torch.tensor(2.0 ** -10)) * 1.0001)
    # elements: at most half a grid step of y = x/d. A normal E4M3 scale is rounded down by at
    # most 2^-4 relative, so y <= 6/(1 - 2^-4) = 6.4 and saturation costs < one half step; a
    # subnormal scale can push y further and the saturated part is then (y - 6)·d.
    y = x64.abs() / torch.where(d > 0, d, 1)
    normal = q.scale.double().repeat_interleave(16, 1) >= 2.0 ** -6
    assert torch.all(y[normal] <= 6.4 * (1 + 1e-5))
    half = torch.where(y < 2, 0.25, torch.where(y < 4, 0.5, 1.0))
    bound = torch.maximum(half, y - 6) * d * (1 + 1e-5)
    bound = torch.where(d > 0, bound, x64.abs())              # a zero scale flushes the block
    assert torch.all(err <= bound + 1e-30 + 1e-6 * amax * 2.0 ** -20), (err - bound).max()


@given(rows=st.sampled_from([1, 2, 16]), nblk=st.integers(1, 4), seed=st.integers(0, 2**31),
       log_scale=st.integers(-30, 30), spread=st.booleans())
def test_nvfp4_error_bound_property(rows, nblk, seed, log_scale, spread):
    x = _randn((rows, 16 * nblk), torch.float32, seed=seed, spread=spread) * 2.0 ** log_scale
    _check_nvfp4_bound(x, block_2d=False)
    if rows % 16 == 0:
        _check_nvfp4_bound(x, block_2d=True)
