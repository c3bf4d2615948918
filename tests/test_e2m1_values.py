"""E2M1 values rounded in floating point (``kernels/_e2m1``) against the codes they stand for.

The expanded views never form a code: they round ``clamp(y, ±6)`` to the E2M1 grid with a
binade-sized magic add (RNE) or a floor at ``step(a)`` (SR). These tests hold that to the
library's encoders (``formats.e2m1_encode`` / ``e2m1_stochastic_encode``, SPEC §1 and §5) and to
the kernels' own code path, over every finite bf16 bit pattern scaled into and around the
grid, the grid's ties and their fp32 neighbours, with random bytes and the extreme bytes 0 and
255. Bits are compared, so a -0 that came out +0 fails. The codes made from the rounded value
(``scaled_e2m1_code_fast``: the value times 2^-126, whose bits are the code) must equal the
comparison chain's. Runs in Triton's interpreter (CI) and, marked ``gpu``, compiled, where the
compiler must not fold ``(a + m) - m`` away nor flush the subnormal 2^-127 to zero, and where
SR floors with PTX ``mul.rz`` and RNE rounds in the scaled domain with one ``fma`` (the
interpreter runs no PTX and rounds a product before adding: float64 models of both are checked
here against the library's encoder too).
"""

from __future__ import annotations

import pytest
import torch

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

from microscale import formats  # noqa: E402
from microscale.kernels._e2m1 import (e2m1_code, e2m1_round_value, e2m1_sr_code,  # noqa: E402
                                      scaled_e2m1_code_fast, scaled_e2m1_nibble)

BLOCK = 1024


@triton.jit
def _values_kernel(y_ptr, b_ptr, val_ptr, code_ptr, fast_ptr, n, SR: tl.constexpr,
                   BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    y = tl.load(y_ptr + offs, mask=ok, other=0.0)
    rb = tl.load(b_ptr + offs, mask=ok, other=0).to(tl.int32)
    tl.store(val_ptr + offs, e2m1_round_value(y, rb, SR), mask=ok)
    if SR:
        code = e2m1_sr_code(y, rb)
    else:
        code = e2m1_code(y)
    tl.store(code_ptr + offs, code, mask=ok)
    tl.store(fast_ptr + offs, scaled_e2m1_code_fast(y, 1.0, rb, SR), mask=ok)


def _inputs(device) -> torch.Tensor:
    """fp32 inputs: every finite bf16 pattern (whole range, so ±6 saturation and subnormals are
    in), the same scaled into [-8, 8], the grid's midpoints and binade edges with their fp32
    neighbours, and random fp32 in [-7, 7]."""
    b = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).float()
    b = b[torch.isfinite(b)]
    inside = b[b.abs() <= 8.0]
    grid = torch.tensor([0, .25, .5, .75, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 7, 8])
    grid = torch.cat((grid, -grid))
    near = torch.cat((grid, torch.nextafter(grid, grid + 1), torch.nextafter(grid, grid - 1)))
    rnd = (torch.rand(1 << 16, generator=torch.Generator().manual_seed(0)) - 0.5) * 14
    y = torch.cat((b, inside * (1 / 32), near, rnd, torch.tensor([-0.0, 0.0, 1e-45, -1e-45])))
    return y.to(device)


def _run(y: torch.Tensor, rbytes: torch.Tensor, sr: bool):
    val, codes = torch.empty_like(y), torch.empty(y.shape, dtype=torch.int32, device=y.device)
    fast = torch.empty_like(codes)
    _values_kernel[(triton.cdiv(y.numel(), BLOCK),)](y, rbytes, val, codes, fast, y.numel(),
                                                     SR=sr, BLOCK=BLOCK)
    assert torch.equal(fast, codes), "the codes through the rounded value differ"
    return val, codes


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.cpu().view(torch.int32)


def _check(y: torch.Tensor, rbytes: torch.Tensor, sr: bool):
    val, kernel_codes = _run(y, rbytes, sr)
    dec = formats.e2m1_decode(kernel_codes.cpu().to(torch.uint8))
    yc = y.cpu()
    codes = (formats.e2m1_stochastic_encode(yc, rbytes.cpu()) if sr
             else formats.e2m1_encode(yc))
    want = formats.e2m1_decode(codes)
    assert torch.equal(_bits(val), _bits(want)), "value path differs from the library encoder"
    assert torch.equal(_bits(val), _bits(dec)), "value path differs from the kernels' codes"


def _sr_bytes(y: torch.Tensor, fill) -> torch.Tensor:
    if fill == "random":
        g = torch.Generator().manual_seed(1)
        return torch.randint(0, 256, y.shape, generator=g, dtype=torch.uint8).to(y.device)
    return torch.full(y.shape, fill, dtype=torch.uint8, device=y.device)


def test_rne_values_equal_codes():
    y = _inputs(torch.device("cpu"))
    _check(y, torch.zeros(y.shape, dtype=torch.uint8), sr=False)


@pytest.mark.parametrize("fill", ["random", 0, 255])
def test_sr_values_equal_codes(fill):
    y = _inputs(torch.device("cpu"))
    _check(y, _sr_bytes(y, fill), sr=True)


def _sr_codes_through_mul_rz(y: torch.Tensor, rbytes: torch.Tensor) -> torch.Tensor:
    """``_e2m1``'s GPU SR codes, modelled in torch: ``t`` as ``_sr_sum`` sums it (fp32), then
    ``mul.rz(t, 2^-126)``: exact (t's bits less 126 exponents) for t ≥ 1, else the subnormal
    ``floor(t · 2^23) · 2^-149``, the truncation toward zero, taken in float64."""
    a = y.abs().clamp(max=6.0)
    binade = torch.clamp(a.view(torch.int32) & 0x7F800000, min=0x3F800000)
    one_u = ((rbytes.to(torch.int32) << 14) | binade).view(torch.float32)
    t = a + (one_u - binade.view(torch.float32))
    tiny = torch.floor(t.double() * 2.0 ** 23).to(torch.int32)
    bits = torch.where(t >= 1.0, t.view(torch.int32) - (126 << 23), tiny)
    return (bits >> 22) | ((y.view(torch.int32) >> 28) & 8)


@pytest.mark.parametrize("fill", ["random", 0, 255])
def test_sr_codes_through_mul_rz_model(fill):
    """The GPU's SR floor, as arithmetic: the codes equal the library's stochastic encoder."""
    y = _inputs(torch.device("cpu"))
    rbytes = _sr_bytes(y, fill)
    want = formats.e2m1_stochastic_encode(y, rbytes).to(torch.int32)
    assert torch.equal(_sr_codes_through_mul_rz(y, rbytes), want)


def _rne_codes_through_fma(y: torch.Tensor) -> torch.Tensor:
    """``_e2m1``'s GPU RNE codes (``_rne_grid_bits``), modelled in torch: ``m'`` from ``a``'s
    exponent bits, ``fma(a, 2^-126, m')`` as one rounding of the exact sum (taken in float64,
    then rounded to fp32: exact wherever ``a`` is near a tie, ``a ≥ 2^-3``, and far from every
    tie below), minus ``m'`` (exact), the code in bits 22-24."""
    a = y.abs().clamp(max=6.0)
    m = torch.clamp((a.view(torch.int32) & 0x7F800000) - 0x33C00000,
                    min=0x0BC00000).view(torch.float32)
    t = (a.double() * 2.0 ** -126 + m.double()).float()
    return ((t - m).view(torch.int32) >> 22) | ((y.view(torch.int32) >> 28) & 8)


def test_rne_codes_through_fma_model():
    """The GPU's RNE codes rounded in the 2^-126-scaled domain equal the library's encoder."""
    y = _inputs(torch.device("cpu"))
    assert torch.equal(_rne_codes_through_fma(y), formats.e2m1_encode(y).to(torch.int32))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_values_equal_codes():
    """Compiled: ptxas must keep ``(a + m) - m`` and the floor as written."""
    y = _inputs(torch.device("cuda"))
    _check(y, torch.zeros(y.shape, dtype=torch.uint8, device=y.device), sr=False)
    for fill in ("random", 0, 255):
        _check(y, _sr_bytes(y, fill), sr=True)


@triton.jit
def _word_bytes_kernel(y_ptr, w_ptr, pos_ptr, out_ptr, ref_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    y = tl.load(y_ptr + offs, mask=ok, other=0.0)
    w = tl.load(w_ptr + offs, mask=ok, other=0)
    pos = tl.load(pos_ptr + offs, mask=ok, other=0)
    tl.store(out_ptr + offs, scaled_e2m1_nibble(y, 1.0, w, True, 0, pos), mask=ok)
    tl.store(ref_ptr + offs, scaled_e2m1_nibble(y, 1.0, (w >> (8 * pos)) & 255, True, 0),
             mask=ok)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_sr_codes_from_a_word_byte(device):
    """SR with the random byte taken from byte ``rpos`` of a 32-bit word (``_e2m1._sr_sum``'s
    byte permute: ``64 · binade`` with the byte as mantissa bits 8-15, PTX ``prmt`` on the
    GPU) gives the codes of the byte extracted first, and the library's stochastic encoder's,
    over every input of ``_inputs`` and random words, every byte position."""
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    y = _inputs(torch.device(device))
    g = torch.Generator().manual_seed(2)
    w = torch.randint(-2 ** 31, 2 ** 31, y.shape, generator=g, dtype=torch.int64)
    w = w.to(torch.int32).to(y.device)
    pos = torch.randint(0, 4, y.shape, generator=g, dtype=torch.int32).to(y.device)
    out, ref = (torch.empty(y.shape, dtype=torch.int32, device=y.device) for _ in range(2))
    _word_bytes_kernel[(triton.cdiv(y.numel(), BLOCK),)](y, w, pos, out, ref, y.numel(),
                                                         BLOCK=BLOCK)
    assert torch.equal(out, ref)
    rbytes = ((w.cpu() >> (8 * pos.cpu())) & 255).to(torch.uint8)
    want = formats.e2m1_stochastic_encode(y.cpu(), rbytes).to(torch.int32)
    assert torch.equal(out.cpu(), want)
