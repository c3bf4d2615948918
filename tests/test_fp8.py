"""FP8 scaling (SPEC §8): blockwise 1×128 / 128×128, tensorwise current scaling, delayed scaling.

A numpy oracle applies the SPEC rule per region R (``scale = fp8_max / amax_R`` in fp32,
amax 0 → 1, inf → the input dtype's max, optional ``2^floor(log2 scale)``), then ml_dtypes'
RNE cast of the clamped product. Data bytes and fp32 ``scale_inv`` must match exactly.
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
from microscale.quant.fp8 import quantize_fp8_tensor

F32 = np.float32
FP8 = {torch.float8_e4m3fn: (ml_dtypes.float8_e4m3fn, 448.0),
       torch.float8_e5m2: (ml_dtypes.float8_e5m2, 57344.0)}


def oracle_scale(amax: np.float32, fp8_max: float, pow2: bool, in_dtype: torch.dtype) -> np.float32:
    if amax == 0:
        return F32(1)
    with np.errstate(over="ignore"):
        scale = F32(F32(fp8_max) / F32(amax))
    if np.isinf(scale):
        scale = F32(torch.finfo(in_dtype).max)
    if pow2:
        scale = F32(2.0 ** (math.frexp(float(scale))[1] - 1))
    return scale


def fp8_oracle(x: torch.Tensor, block, pow2: bool, fp8_dtype=torch.float8_e4m3fn):
    """(data bytes [rows, cols], scale_inv fp32 [rows/br, cols/bc]) for regions of size block."""
    ml_type, fp8_max = FP8[fp8_dtype]
    x2 = x.float().numpy().reshape(-1, x.shape[-1]).astype(F32)
    br, bc = block if block is not None else x2.shape
    data = np.zeros(x2.shape, np.uint8)
    inv = np.zeros((x2.shape[0] // br, x2.shape[1] // bc), F32)
    for i in range(inv.shape[0]):
        for j in range(inv.shape[1]):
            reg = x2[i * br:(i + 1) * br, j * bc:(j + 1) * bc]
            scale = oracle_scale(F32(np.max(np.abs(reg))), fp8_max, pow2, x.dtype)
            inv[i, j] = F32(F32(1) / scale)
            y = np.clip((reg * scale).astype(F32), -fp8_max, fp8_max)
            data[i * br:(i + 1) * br, j * bc:(j + 1) * bc] = y.astype(ml_type).view(np.uint8)
    return data, inv


def _randn(shape, dtype, seed, block_cols=128):
    g = torch.Generator().manual_seed(seed)
    mag = torch.exp2(torch.randint(-16, 16, (*shape[:-1], shape[-1] // block_cols, 1),
                                   generator=g).float())
    mag = mag.expand(*shape[:-1], shape[-1] // block_cols, block_cols).reshape(shape)
    return (torch.randn(shape, generator=g) * mag).to(dtype)


# --------------------------------------------------------------------------- blockwise
@pytest.mark.parametrize("shape, dtype, block", [
    ((2, 256), torch.float32, (1, 128)), ((3, 2, 128), torch.float16, (1, 128)),
    ((128, 256), torch.bfloat16, (128, 128)), ((256, 128), torch.float32, (128, 128)),
])
@pytest.mark.parametrize("pow2", [True, False])
def test_block_matches_oracle(shape, dtype, block, pow2):
    x = _randn(shape, dtype, seed=shape[0])
    q = ms.quantize(x, "fp8_block", block=block, pow2_scales=pow2, backend="reference")
    data, inv = fp8_oracle(x, block, pow2)
    assert q.data.dtype == torch.float8_e4m3fn and q.scale.dtype == torch.float32
    assert q.scale.shape == inv.shape and q.block == block
    np.testing.assert_array_equal(q.data.view(torch.uint8).numpy(), data)
    np.testing.assert_array_equal(q.scale.numpy(), inv)
    assert q.amax.item() == x.float().abs().max().item()
    if pow2:  # power-of-two scale_inv: mantissa bits all zero
        assert np.all(np.frexp(inv)[0] == 0.5)


def test_block_128x128_transpose_is_exact():
    x = _randn((256, 384), torch.bfloat16, seed=3)
    q_t = ms.quantize(x, "fp8_block", block=(128, 128)).t()
    q_of_t = ms.quantize(x.t().contiguous(), "fp8_block", block=(128, 128))
    assert q_t.shape == (384, 256)
    assert torch.equal(q_t.data.view(torch.uint8), q_of_t.data.view(torch.uint8))
    assert torch.equal(q_t.scale, q_of_t.scale)
    assert torch.equal(q_t.dequantize(), q_of_t.dequantize())
    with pytest.raises(ValueError, match="re-quantize"):
        ms.quantize(x, "fp8_block", block=(1, 128)).t()


def test_block_zero_block_and_bad_block():
    x = torch.zeros(2, 256)
    x[1, 130] = 3.0
    q = ms.quantize(x, "fp8_block")
    assert q.scale.tolist()[0] == [1.0, 1.0] and q.scale[1, 0].item() == 1.0
    assert q.scale[1, 1].item() == 2.0 ** -7    # 448/3 = 149.3 -> 2^7
    assert torch.equal(q.dequantize(), x)
    with pytest.raises(ValueError, match="block"):
        ms.quantize(torch.ones(128, 128), "fp8_block", block=(1, 64))


@given(rows=st.integers(1, 3), nblk=st.integers(1, 2), seed=st.integers(0, 2**31),
       log_scale=st.integers(-40, 40), pow2=st.booleans())
def test_block_error_bound_property(rows, nblk, seed, log_scale, pow2):
    x = _randn((rows, 128 * nblk), torch.float32, seed) * 2.0 ** log_scale
    q = ms.quantize(x, "fp8_block", pow2_scales=pow2)
    x64 = x.double()
    scale = 1.0 / q.scale.double().repeat_interleave(128, 1)
    vmax = x64.abs().reshape(rows, nblk, 128).amax(-1).repeat_interleave(128, 1)
    top = vmax * scale                      # where the block max lands on the E4M3 range
    lo = 224.0 if pow2 else 448.0 * (1 - 1e-6)
    assert torch.all((top <= 448 * (1 + 1e-6)) & (top > lo))
    y = x64.abs() * scale
    bound = torch.maximum(y * 2.0 ** -4, torch.tensor(2.0 ** -10)) / scale   # 3 mantissa bits
    err = (q.dequantize().double() - x64).abs()
    assert torch.all(err <= bound * (1 + 1e-6))


# --------------------------------------------------------------------------- tensorwise
@pytest.mark.parametrize("fp8_dtype", list(FP8))
@pytest.mark.parametrize("pow2", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tensor_current_scaling_matches_oracle(fp8_dtype, pow2, dtype):
    x = _randn((4, 3, 64), dtype, seed=8, block_cols=64)
    q = ms.quantize(x, "fp8_tensor", fp8_dtype=fp8_dtype, pow2_scales=pow2, backend="reference")
    data, inv = fp8_oracle(x, None, pow2, fp8_dtype)
    assert q.data.dtype == fp8_dtype and q.scale.dim() == 0 and q.shape == x.shape
    np.testing.assert_array_equal(q.data.view(torch.uint8).numpy(), data)
    assert q.scale.item() == inv[0, 0]


def test_tensor_scale_edge_cases():
    # amax = 0 -> scale 1
    assert quantize_fp8_tensor(torch.zeros(4)).scale.item() == 1.0
    # 448 / amax overflows fp32 -> the input dtype's max
    tiny32 = torch.tensor([1e-45, 0.0])
    assert quantize_fp8_tensor(tiny32).scale.item() == F32(1) / F32(torch.finfo(torch.float32).max)
    tiny_bf16 = torch.tensor([1e-40, 0.0], dtype=torch.bfloat16)
    want = F32(1) / F32(torch.finfo(torch.bfloat16).max)
    assert quantize_fp8_tensor(tiny_bf16).scale.item() == want
    # a given scale is used as is (delayed scaling)
    q = quantize_fp8_tensor(torch.tensor([1.0, 100.0]), scale=torch.tensor(8.0))
    assert q.data.float().flatten().tolist() == [8.0, 448.0] and q.scale.item() == 0.125


def test_scale_is_one_ieee_division():
    from microscale.quant.fp8 import fp8_scale_from_amax
    rng = np.random.default_rng(1)
    amax = (2.0 ** rng.uniform(-60, 60, 100_000)).astype(F32)
    for fp8_dtype, (_, fmax) in FP8.items():
        got = fp8_scale_from_amax(torch.from_numpy(amax), fp8_dtype, pow2_scales=False)
        np.testing.assert_array_equal(got.numpy(), F32(fmax) / amax)
    ds = ms.DelayedScaling()
    ds.update(torch.tensor(1989.0))             # 448/1989: reciprocal·448 is one ulp off
    assert ds.scale.item() == F32(448) / F32(1989)


# --------------------------------------------------------------------------- delayed scaling
def _amax_tensor(a):
    return torch.tensor([float(a), 0.0])  # a tensor whose amax is a


def test_delayed_history_window_and_margin():
    ds = ms.DelayedScaling(history_len=4, margin=1)
    amaxes = [1, 8, 2, 0.5, 0.25, 0.25]
    want = [448 / 1 / 2, 448 / 8 / 2, 448 / 8 / 2, 448 / 8 / 2, 448 / 8 / 2, 448 / 2 / 2]
    prev = 1.0
    for a, w in zip(amaxes, want):
        q = ds.quantize(_amax_tensor(a))
        assert q.scale.item() == F32(1) / F32(prev)  # quantized with the scale from history
        assert ds.scale.item() == w
        prev = w
    assert ds.steps == 6
    default = ms.DelayedScaling()
    assert default.history_len == 1024 and default.margin == 0


def test_delayed_keeps_scale_on_zero_and_non_finite():
    ds = ms.DelayedScaling(history_len=2)
    ds.quantize(torch.zeros(8))
    assert ds.scale.item() == 1.0                  # amax 0: keep
    ds.quantize(_amax_tensor(4.0))
    assert ds.scale.item() == 112.0
    ds.quantize(torch.tensor([float("inf"), 1.0]), check_finite=False)
    assert ds.scale.item() == 112.0                # inf in the window: keep
    ds.quantize(_amax_tensor(2.0))
    assert ds.scale.item() == 112.0                # still in the 2-step window
    ds.quantize(_amax_tensor(2.0))
    assert ds.scale.item() == 224.0
    ds.update(torch.tensor(float("nan")))
    assert ds.scale.item() == 224.0


def test_delayed_state_dict_round_trip():
    ds = ms.DelayedScaling(fp8_dtype=torch.float8_e5m2, history_len=3, margin=2)
    for a in (3.0, 5.0):
        ds.quantize(_amax_tensor(a))
    state = ds.state_dict()
    clone = ms.DelayedScaling(fp8_dtype=torch.float8_e5m2, history_len=3)
    clone.load_state_dict(state)
    assert clone.margin == 2 and clone.steps == 2
    state["amax_history"][0] = 1e9                  # the saved state is a copy
    x = torch.tensor([7.0, -1.0, 0.5])
    for _ in range(3):
        a, b = ds.quantize(x), clone.quantize(x)
        assert torch.equal(a.data.view(torch.uint8), b.data.view(torch.uint8))
        assert torch.equal(ds.scale, clone.scale) and torch.equal(ds.amax_history, clone.amax_history)
    with pytest.raises(ValueError, match="history length"):
        ms.DelayedScaling(history_len=5).load_state_dict(ds.state_dict())
    with pytest.raises(ValueError, match="history_len"):
        ms.DelayedScaling(history_len=0)
