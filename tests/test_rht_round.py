"""The rotated values' rounding to the input dtype (``kernels._rht``): ``finish_rotated_pair``
(one ``cvt.rn.bf16x2.f32`` for two values on the GPU) against torch's own casts, the oracle,
over fp32 bit patterns that cover every rounding case: ties to even and odd, values just
either side of a tie, bf16's largest finite values and the overflow to Inf above them,
subnormals, signed zeros, Inf and NaN."""

from __future__ import annotations

import pytest
import torch

from kernel_env import DEV, needs_kernels

triton = pytest.importorskip("triton")
tl = triton.language


@triton.jit
def _pair_kernel(a_ptr, b_ptr, out_a_ptr, out_b_ptr, n, IN_DTYPE: tl.constexpr,
                 BLOCK: tl.constexpr):
    from microscale.kernels._rht import finish_rotated_pair
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    a = tl.load(a_ptr + offs, mask=ok, other=0.0)
    b = tl.load(b_ptr + offs, mask=ok, other=0.0)
    ra, rb = finish_rotated_pair(a, b, IN_DTYPE)
    tl.store(out_a_ptr + offs, ra, mask=ok)
    tl.store(out_b_ptr + offs, rb, mask=ok)


def _patterns() -> torch.Tensor:
    """fp32 values as int32 bit patterns: every rounding case of fp32 -> bf16 (the low 16
    bits at, just below and just above the tie, with even and odd kept parts) over a spread
    of exponents, bf16's top binade, subnormals, zeros, Inf and NaN; both signs."""
    tops = [0x0000, 0x0001, 0x0080, 0x0081, 0x3F80, 0x3F81, 0x4040, 0x7E00, 0x7F7E, 0x7F7F,
            0x7F80, 0x7FC0, 0x7FFF, 0x0040, 0x0041]
    lows = [0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x4000, 0xC000]
    bits = [(t << 16) | lo for t in tops for lo in lows]
    gen = torch.Generator().manual_seed(0)
    rand = torch.randint(0, 1 << 31, (4096,), generator=gen, dtype=torch.int64).tolist()
    bits += rand
    bits += [b | (1 << 31) for b in bits]
    # NaNs as the kernels meet them: bf16/fp16 inputs widened (low half zero) and arithmetic
    # results (the canonical NaN); a NaN payload in the low half would need the interpreter's
    # integer rounding (``_utils.round_to_input_dtype``) to guard against a carry
    return torch.tensor([b for b in bits if not _nan_with_low_bits(b)], dtype=torch.int64).to(
        torch.int32)


def _nan_with_low_bits(b: int) -> bool:
    return (b >> 23) & 0xFF == 0xFF and b & 0x7FFFFF != 0 and b & 0xFFFF != 0


def _same(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Bitwise equal, every NaN counted equal to every NaN (the kernel's NaN bits are the
    hardware's canonical NaN; a NaN stays a NaN, which is what the callers test)."""
    nan = want.isnan()
    return bool(torch.equal(got.isnan(), nan)
                and torch.equal(got[~nan].view(torch.int32), want[~nan].view(torch.int32)))


@needs_kernels
@pytest.mark.parametrize("in_dtype, torch_dtype", [(1, torch.bfloat16), (0, torch.float32)])
def test_pair_rounding_matches_torch_cast(in_dtype, torch_dtype):
    """On the GPU the PTX pair conversion; in the interpreter the single casts it stands for."""
    x = _patterns().view(torch.float32)
    a, b = x.to(DEV), x.flip(0).contiguous().to(DEV)           # each value in both slots
    out_a, out_b = torch.empty_like(a), torch.empty_like(b)
    _pair_kernel[(triton.cdiv(a.numel(), 256),)](a, b, out_a, out_b, a.numel(), in_dtype, 256)
    for got, src in ((out_a, a), (out_b, b)):
        assert _same(got.cpu(), src.cpu().to(torch_dtype).float())
