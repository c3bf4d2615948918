"""Blackwell's native block-scaled GEMM (kernels/blackwell.py): the scale re-layout and the
operand packing, bit-exact on CPU; the hardware call itself only on a 10.x-12.x GPU.

The 128×4 blocked ("32_4_4") layout is checked three ways: against a from-first-principles
index map (the formula of the module docstring, applied element by element), against
torch's own test helper ``to_blocked`` (read from torch's installed test utilities, when
present), and by the inverse."""

from __future__ import annotations

import ast
import importlib.util

import pytest
import torch

import microscale as ms
from microscale.backend import KernelUnsupported
from microscale.formats import pack_fp4
from microscale.gemm import scaled_mm_reference

blackwell = pytest.importorskip("microscale.kernels.blackwell")
SHAPES = [(1, 1), (128, 4), (130, 7), (300, 33), (256, 512), (1000, 40)]


def _torch_helpers(*names):
    """Functions from torch.testing._internal.common_quantized, parsed out of the installed
    file (importing it needs test-only packages); None when torch does not ship them."""
    spec = importlib.util.find_spec("torch.testing._internal.common_quantized")
    if spec is None or spec.origin is None:
        return None
    with open(spec.origin) as f:
        tree = ast.parse(f.read())
    ns = {"torch": torch}
    nodes = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    if {n.name for n in nodes} != set(names):
        return None
    exec(compile(ast.Module(nodes, []), spec.origin, "exec"), ns)  # noqa: S102 (torch's file)
    return [ns[n] for n in names]


def _offset_loop(r: int, c: int, cols: int) -> int:
    """The layout, one element at a time: which 128×4 block, then where inside it."""
    block_row, block_col = r // 128, c // 4
    n_block_cols = -(-cols // 4)
    inner_r, inner_c = r % 128, c % 4
    within = (inner_r % 32) * 16 + (inner_r // 32) * 4 + inner_c
    return (block_row * n_block_cols + block_col) * 512 + within


@pytest.mark.parametrize("rows,cols", SHAPES)
def test_swizzle_matches_index_map_and_inverts(rows, cols):
    s = torch.randint(0, 255, (rows, cols), dtype=torch.uint8,
                      generator=torch.Generator().manual_seed(rows * 1000 + cols))
    flat = blackwell.swizzle_scales(s)
    n = -(-rows // 128) * 128 * (-(-cols // 4)) * 4
    assert flat.shape == (n,) and flat.is_contiguous()
    offsets = blackwell.swizzle_offsets(rows, cols)
    expect = torch.zeros(n, dtype=torch.uint8)
    expect[offsets.flatten()] = s.flatten()
    assert torch.equal(flat, expect)                          # padding is zero
    for r, c in [(0, 0), (rows - 1, cols - 1), (rows // 2, cols // 3)]:
        assert offsets[r, c].item() == _offset_loop(r, c, cols)
    assert torch.equal(blackwell.unswizzle_scales(flat, rows, cols), s)


@pytest.mark.parametrize("rows,cols", SHAPES)
def test_swizzle_matches_torch_helper(rows, cols):
    helpers = _torch_helpers("ceil_div", "to_blocked")
    if helpers is None:
        pytest.skip("this torch ships no to_blocked test helper")
    s = torch.randint(0, 255, (rows, cols), dtype=torch.uint8)
    assert torch.equal(blackwell.swizzle_scales(s), helpers[1](s))


def test_swizzle_keeps_scale_dtypes():
    s = torch.randint(0, 255, (130, 6), dtype=torch.uint8)
    for dtype in (torch.float8_e4m3fn, getattr(torch, "float8_e8m0fnu", torch.float8_e4m3fn)):
        flat = blackwell.swizzle_scales(s.view(dtype))
        assert flat.dtype == dtype
        assert torch.equal(flat.view(torch.uint8), blackwell.swizzle_scales(s))


def test_fp4_packing_is_torchs():
    """Our packed E2M1 bytes are torch's float4_e2m1fn_x2 layout: element 2j low nibble."""
    helpers = _torch_helpers("down_size", "pack_uint4")
    codes = torch.randint(0, 16, (6, 32), dtype=torch.uint8)
    ours = pack_fp4(codes)
    assert torch.equal(ours & 0xF, codes[:, 0::2]) and torch.equal(ours >> 4, codes[:, 1::2])
    if helpers is not None:
        assert torch.equal(ours, helpers[1](codes))


@pytest.mark.parametrize("fmt,scale_dtype", [("nvfp4", "float8_e4m3fn"),
                                             ("mxfp4", "float8_e8m0fnu"),
                                             ("mxfp8_e4m3", "float8_e8m0fnu")])
def test_native_operands(fmt, scale_dtype):
    if not hasattr(torch, "float4_e2m1fn_x2") or not hasattr(torch, scale_dtype):
        pytest.skip("this torch lacks the FP4 / E8M0 dtypes")
    x = torch.randn(200, 96, generator=torch.Generator().manual_seed(1))
    q = ms.quantize(x, fmt, backend="reference")
    data, scale = blackwell.native_operands(q)
    want_data = torch.float8_e4m3fn if fmt == "mxfp8_e4m3" else torch.float4_e2m1fn_x2
    assert data.dtype == want_data and data.data_ptr() == q.data.data_ptr()     # a view
    assert scale.dtype == getattr(torch, scale_dtype)
    assert torch.equal(blackwell.unswizzle_scales(scale, *q.scale.shape).view(torch.uint8),
                       q.scale.view(torch.uint8))


def test_native_refuses_what_cublas_cannot_take():
    x = torch.randn(32, 64)
    with pytest.raises(KernelUnsupported, match="E4M3"):
        blackwell.native_operands(ms.quantize(x, "mxfp8_e5m2", backend="reference"))
    q = ms.quantize(x, "nvfp4", backend="reference")
    with pytest.raises(KernelUnsupported, match="expanded operand"):
        blackwell.native_operands(q.expand())                # bf16 values, not codes
    with pytest.raises(KernelUnsupported, match="compute capability"):
        blackwell.scaled_mm_native(q, q)                     # a CPU tensor
    assert not blackwell.has_native_block_scaling(torch.device("cpu"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available()
                    or torch.cuda.get_device_capability()[0] not in blackwell.NATIVE_MAJORS,
                    reason="needs a Blackwell GPU (compute capability 10.x-12.x)")
@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp4", "mxfp8_e4m3"])
def test_gpu_native_matches_reference(fmt):
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(1000, 1024, generator=g).cuda(), torch.randn(768, 1024, generator=g).cuda()
    qa, qb = ms.quantize(a, fmt, backend="reference"), ms.quantize(b, fmt, backend="reference")
    ref = scaled_mm_reference(qa, qb)
    y = blackwell.scaled_mm_native(qa, qb)
    assert ((y - ref).norm() / ref.norm()).item() < 8e-3
