"""Bad input fails early with an error that names the problem (every format, one entry point)."""

from __future__ import annotations

import pytest
import torch

import microscale as ms

FORMATS = ["nvfp4", "mxfp8_e4m3", "mxfp8_e5m2", "mxfp4", "fp8_block", "fp8_tensor"]
GOOD_COLS = 128  # a multiple of every block (16, 32, 128)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", [torch.int32, torch.float64, torch.uint8, torch.bool])
def test_wrong_dtype_is_type_error_naming_it(fmt, dtype):
    x = torch.ones(2, GOOD_COLS, dtype=dtype)
    with pytest.raises(TypeError, match=str(dtype)):
        ms.quantize(x, fmt)


@pytest.mark.parametrize("fmt, cols, block", [
    ("nvfp4", 24, 16), ("mxfp8_e4m3", 48, 32), ("mxfp4", 16, 32), ("fp8_block", 192, 128),
])
def test_last_dim_not_divisible(fmt, cols, block):
    with pytest.raises(ValueError, match=f"{cols} is not divisible by the block size {block}"):
        ms.quantize(torch.ones(4, cols), fmt)


@pytest.mark.parametrize("fmt, opts, rows", [
    ("nvfp4", {"block_2d": True}, 24), ("nvfp4", {"block_2d": True}, 1),
    ("fp8_block", {"block": (128, 128)}, 64),
])
def test_2d_tiles_need_divisible_rows(fmt, opts, rows):
    with pytest.raises(ValueError, match=f"row count .*{rows}"):
        ms.quantize(torch.ones(rows, GOOD_COLS), fmt, **opts)
    # leading dims are flattened before the check: [2, 8, cols] has 16 rows and is fine
    if fmt == "nvfp4":
        ms.quantize(torch.ones(2, 8, GOOD_COLS), fmt, **opts)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape", [(0, GOOD_COLS), (4, 0), (0,)])
def test_empty_tensor(fmt, shape):
    with pytest.raises(ValueError, match="empty"):
        ms.quantize(torch.ones(shape), fmt)


@pytest.mark.parametrize("fmt", FORMATS)
def test_zero_dim_tensor(fmt):
    with pytest.raises(ValueError, match="0-dim"):
        ms.quantize(torch.tensor(1.0), fmt)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("bad", ["nan", "inf", "-inf"])
def test_non_finite_input_named(fmt, bad):
    x = torch.ones(2, GOOD_COLS)
    x[1, 5] = float(bad)
    want = "NaN" if bad == "nan" else "Inf"
    with pytest.raises(ValueError, match=want):
        ms.quantize(x, fmt)
    with pytest.raises(ValueError, match=want):
        ms.quantize(x.to(torch.bfloat16), fmt)


def test_nan_reported_over_inf():
    x = torch.ones(1, 32)
    x[0, 0], x[0, 1] = float("inf"), float("nan")
    with pytest.raises(ValueError, match="NaN"):
        ms.quantize(x, "nvfp4")


def test_check_finite_false_inf_follows_spec_amax_rule():
    x = torch.full((1, 32), 0.5)
    x[0, 20] = -float("inf")
    q = ms.quantize(x, "nvfp4", check_finite=False)
    assert q.amax.item() == float("inf")
    s_enc, s_dec = ms.quant.nvfp4.nvfp4_global_scales(q.amax)
    assert s_enc.item() == 1.0 and s_dec.item() == 1.0      # S_enc = 1 when amax = inf
    # block 0 (finite) is quantized with S_enc = 1 and round-trips its value to E2M1 precision
    torch.testing.assert_close(q.dequantize()[0, :16], x[0, :16], rtol=0.1, atol=0)
    assert q.scale[0, 1].float().item() == 448.0            # the inf block saturates


@pytest.mark.parametrize("fmt, d, match", [
    ("nvfp4", 32, "multiple of the RHT size"), ("nvfp4", 24, "power of two"),
    ("mxfp4", 64, "multiple of the RHT size"), ("nvfp4", 256, "power of two"),
])
def test_rht_size_must_divide_last_dim(fmt, d, match):
    with pytest.raises(ValueError, match=match):
        ms.quantize(torch.ones(2, 48 if fmt == "nvfp4" else 32), fmt, rht=True, rht_d=d)


def test_unknown_format_and_options():
    with pytest.raises(ValueError, match="unknown format 'nvfp8'.*'nvfp4'"):
        ms.quantize(torch.ones(2, 32), "nvfp8")
    with pytest.raises(TypeError, match="block2d"):
        ms.quantize(torch.ones(2, 32), "nvfp4", block2d=True)
    with pytest.raises(TypeError, match="rht"):
        ms.quantize(torch.ones(2, 32), "mxfp8_e4m3", rht=True)       # RHT is FP4-only
    with pytest.raises(TypeError, match="scale_rounding"):
        ms.quantize(torch.ones(2, 32), "nvfp4", scale_rounding="ceil")
    with pytest.raises(TypeError, match="stochastic"):
        ms.quantize_rowcol(torch.ones(32, 32), ("nvfp4", {"stochastc": True}), None)
    with pytest.raises(ValueError, match="unknown format"):
        ms.quantize_rowcol(torch.ones(32, 32), None, ("fp4", {}))


def test_bad_option_values():
    x = torch.ones(2, 128)
    with pytest.raises(ValueError, match="scale_rounding"):
        ms.quantize(x, "mxfp8_e4m3", scale_rounding="round")
    with pytest.raises(TypeError, match="stochastic"):
        ms.quantize(x, "mxfp8_e4m3", stochastic=True)             # SR is FP4-only
    with pytest.raises(ValueError, match="stochastic"):
        ms.quant.quantize_mx(x, "mxfp8_e4m3", stochastic=True)
    with pytest.raises(ValueError, match="block"):
        ms.quantize(x, "fp8_block", block=(1, 32))
    with pytest.raises(TypeError, match="float8"):
        ms.quantize(x, "fp8_tensor", fp8_dtype=torch.float16)
    with pytest.raises(ValueError, match="rand_bits"):
        ms.quantize(x, "nvfp4", stochastic=True, rand_bits=torch.zeros(2, 64, dtype=torch.uint8))
    with pytest.raises(ValueError, match="rand_bits"):
        ms.quantize(x, "nvfp4", stochastic=True, rand_bits=torch.zeros(2, 128))
    with pytest.raises(ValueError, match="backend"):
        ms.quantize(x, "nvfp4", backend="gpu")


def test_non_tensor_inputs():
    with pytest.raises(TypeError, match="list"):
        ms.quantize([1.0] * 16, "nvfp4")
    with pytest.raises(TypeError, match="ndarray"):
        ms.quantize_rowcol(__import__("numpy").ones((16, 16)), ("nvfp4", {}), None)
    with pytest.raises(ValueError, match="non-empty"):
        ms.quantize_rowcol(torch.ones(0, 16), ("nvfp4", {}), None)


@pytest.mark.parametrize("fmt", FORMATS)
def test_quantized_tensor_holds_no_autograd_history(fmt):
    x = torch.randn(128, 128, requires_grad=True)
    q = ms.quantize(x, fmt)
    assert not any(t.requires_grad for t in (q.data, q.scale, q.amax))
    # a non-contiguous view quantizes like its contiguous copy
    xt = x.detach()[:, :64].t()
    a, b = ms.quantize(xt, fmt), ms.quantize(xt.contiguous(), fmt)
    assert torch.equal(a.data.view(torch.uint8), b.data.view(torch.uint8))
