"""GEMM kernels (kernels/gemm_fp4.py, kernels/gemm_fp8.py) against ``gemm.scaled_mm_reference``.

On CPU the Triton kernels run in Triton's interpreter (``TRITON_INTERPRET=1``, set by the CI
command); there the emulation must match the fp32 reference to fp32 rounding, because every
``value · scale`` is exact. ``gpu`` tests run real shapes and the torch/cuBLAS paths, at the
SPEC §6 tolerance (atol = rtol = 8e-3, atol relative to the output's RMS).
"""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

import microscale as ms
from microscale.backend import KernelUnsupported
from microscale.gemm import scaled_mm_reference

HAS_TRITON = importlib.util.find_spec("triton") is not None
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
HAS_CUDA = torch.cuda.is_available()

pytestmark = pytest.mark.skipif(
    not HAS_TRITON or not (INTERPRET or HAS_CUDA),
    reason="needs Triton and either CUDA or TRITON_INTERPRET=1 (set before importing triton)")

if HAS_TRITON and (INTERPRET or HAS_CUDA):
    from microscale.kernels import gemm_fp4, gemm_fp8

DEV = "cuda" if HAS_CUDA and not INTERPRET else "cpu"
TOL = 8e-3

# key -> (quantize options for A, for B)
FORMATS = {
    "nvfp4xnvfp4": (("nvfp4", {}), ("nvfp4", {"block_2d": True})),
    "mxfp4xmxfp4": (("mxfp4", {}), ("mxfp4", {})),
    "mxfp8_e4m3xmxfp8_e4m3": (("mxfp8_e4m3", {}), ("mxfp8_e4m3", {})),
    "mxfp8_e5m2xmxfp8_e4m3": (("mxfp8_e5m2", {}), ("mxfp8_e4m3", {})),
    "fp8_blockxfp8_block": (("fp8_block", {"block": (1, 128)}),
                            ("fp8_block", {"block": (128, 128)})),
    "fp8_tensorxfp8_tensor": (("fp8_tensor", {}),
                              ("fp8_tensor", {"fp8_dtype": torch.float8_e5m2})),
}


def _operands(key, m, n, k, seed=0, device=DEV):
    g = torch.Generator().manual_seed(seed)
    (fa, oa), (fb, ob) = FORMATS[key]
    if ob.get("block_2d") and n % 16:          # 16x16 weight tiles need N % 16: use 1x16 there
        ob = {}
    a = torch.randn(m, k, generator=g).to(device)
    b = (torch.randn(n, k, generator=g) * 0.1).to(device)
    qa = ms.quantize(a, fa, backend="reference", **oa)
    qb = ms.quantize(b, fb, backend="reference", **ob)
    return qa, qb


def _assert_close(y, ref, tol=TOL):
    y, ref = y.float(), ref.float()
    assert torch.isfinite(y).all()
    rms = ref.pow(2).mean().sqrt().clamp_min(1e-30)
    torch.testing.assert_close(y, ref, atol=tol * rms.item(), rtol=tol)
    assert ((y - ref).norm() / ref.norm()).item() < tol


def _rel(y, ref):
    return ((y.float() - ref.float()).norm() / ref.float().norm()).item()


def _shape_for(key, m, n, k):
    """FP8 blocks need K % 128 and 128x128 weights need N % 128: round up where needed."""
    if key.startswith("fp8_block"):
        return m, -(-n // 128) * 128, -(-k // 128) * 128
    return m, n, k


# ----------------------------------------------------------------------------- interpreter / CPU
@pytest.mark.parametrize("key", sorted(FORMATS))
@pytest.mark.parametrize("mnk", [(32, 48, 64), (16, 16, 128), (17, 33, 96)])
def test_every_key_matches_reference(key, mnk):
    """ms.scaled_mm(backend='triton') reaches the registered kernel and matches the spec."""
    m, n, k = _shape_for(key, *mnk)
    qa, qb = _operands(key, m, n, k)
    y = ms.scaled_mm(qa, qb, backend="triton")
    ref = scaled_mm_reference(qa, qb)
    assert y.shape == ref.shape == (m, n) and y.dtype == torch.float32
    _assert_close(y, ref)
    if DEV == "cpu":                      # interpreter: exact products, fp32 sums
        assert _rel(y, ref) < 1e-5


@pytest.mark.parametrize("key", ["nvfp4xnvfp4", "mxfp4xmxfp4", "mxfp8_e4m3xmxfp8_e4m3"])
@pytest.mark.parametrize("strategy", ["mainloop", "mainloop_big_tile", "dequant",
                                      "dequant_permuted"])
@pytest.mark.parametrize("mnk", [(40, 24, 160), (1, 70, 32)])
def test_both_strategies_exact(key, strategy, mnk):
    """Both emulation strategies agree with the spec: the dequant-in-mainloop kernel (small
    tiles, and the default tiles with K steps past K), the dequant pass + GEMM in natural and
    in permuted K order (with a partial last K chunk)."""
    qa, qb = _operands(key, *mnk, seed=1)
    fn = gemm_fp4.scaled_mm_mxfp8 if key.startswith("mxfp8") else gemm_fp4.scaled_mm_fp4
    small_k = 32 if key.startswith("mxfp8") else 16    # bytes per K step: 32 elements
    tile = {"dequant": {"block_bytes": 32}, "mainloop": {"bm": 32, "bn": 32, "bkb": small_k},
            "mainloop_big_tile": {},
            "dequant_permuted": {"block_bytes": 32, "permute_k": True}}[strategy]
    y = fn(qa, qb, strategy=strategy.split("_")[0], **tile)
    ref = scaled_mm_reference(qa, qb)
    _assert_close(y, ref)
    if DEV == "cpu":
        assert _rel(y, ref) < 1e-5


def test_nvfp4_alpha_rht_and_batched_activation():
    """α = amax_a·amax_b/7225344 is applied; RHT operands; a 3-D activation keeps its shape."""
    g = torch.Generator().manual_seed(2)
    x = (torch.randn(2, 24, 64, generator=g) * 50).to(DEV)     # amax far from 1: α matters
    w = (torch.randn(40, 64, generator=g) * 0.01).to(DEV)
    qx = ms.quantize(x, "nvfp4", rht=True, backend="reference")
    qw = ms.quantize(w, "nvfp4", rht=True, backend="reference")
    for strategy in ("mainloop", "dequant"):
        y = gemm_fp4.scaled_mm_fp4(qx, qw, out_dtype=torch.bfloat16, strategy=strategy)
        ref = scaled_mm_reference(qx, qw, out_dtype=torch.bfloat16)
        assert y.shape == (2, 24, 40) and y.dtype == torch.bfloat16
        _assert_close(y, ref)


@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp4", "mxfp8_e5m2"])
def test_dequantize_bf16_is_exact(fmt):
    """The dequantize pass writes value · block scale exactly (bf16 holds every product)."""
    x = torch.randn(19, 96, generator=torch.Generator().manual_seed(3)).to(DEV) * 3
    q = ms.quantize(x, fmt, backend="reference")
    expect = q.values() * q.block_scales()
    got = gemm_fp4.dequantize_bf16(q)
    assert got.dtype == torch.bfloat16 and got.shape == (19, 96)
    assert torch.equal(got.float(), expect)


@pytest.mark.parametrize("blocks", [((1, 128), (1, 128)), ((128, 128), (1, 128))])
def test_fp8_block_other_pairings(blocks):
    """wgrad's 1x128 x 1x128 and a 128x128 left operand through the Triton FP8 kernel."""
    g = torch.Generator().manual_seed(4)
    a, b = torch.randn(128, 256, generator=g).to(DEV), torch.randn(72, 256, generator=g).to(DEV)
    qa = ms.quantize(a, "fp8_block", block=blocks[0], backend="reference")
    qb = ms.quantize(b, "fp8_block", block=blocks[1], backend="reference")
    y = gemm_fp8.scaled_mm_fp8(qa, qb, path="triton", bm=32, bn=32)
    _assert_close(y, scaled_mm_reference(qa, qb))


@pytest.mark.parametrize("split_k", [3, 8])
def test_fp8_triton_split_k(split_k):
    """The Triton FP8 kernel with K split over programs (5 K blocks in 3 runs of 2, 2, 1, or
    in 8 runs of which 3 are empty): fp32 partials summed in a fixed order, the reference's
    result up to summation order, and the same bits on every call."""
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(64, 640, generator=g).to(DEV), torch.randn(40, 640, generator=g).to(DEV)
    qa = ms.quantize(a, "fp8_block", block=(1, 128), backend="reference")
    qb = ms.quantize(b, "fp8_block", block=(1, 128), backend="reference")
    y = gemm_fp8.scaled_mm_fp8(qa, qb, torch.float32, path="triton", bm=32, bn=32,
                               split_k=split_k)
    _assert_close(y, scaled_mm_reference(qa, qb))
    assert torch.equal(y, gemm_fp8.scaled_mm_fp8(qa, qb, torch.float32, path="triton", bm=32,
                                                 bn=32, split_k=split_k))
    with pytest.raises(ValueError, match="split_k"):
        gemm_fp8.scaled_mm_fp8(qa, qb, path="triton", split_k=0)


def test_unsupported_and_bad_arguments():
    qa, _ = _operands("nvfp4xnvfp4", 16, 16, 64)
    _, qb8 = _operands("mxfp8_e4m3xmxfp8_e4m3", 16, 16, 64)
    with pytest.raises(KernelUnsupported):
        gemm_fp4.scaled_mm_fp4(qa, qb8)                # FP4 x FP8 is not this kernel's
    with pytest.raises(KernelUnsupported):
        gemm_fp8.scaled_mm_fp8(qa, qa)
    with pytest.raises(ValueError, match="strategy"):
        gemm_fp4.scaled_mm_fp4(qa, qa, strategy="fastest")
    with pytest.raises(ValueError, match="path"):
        gemm_fp8.scaled_mm_fp8(qb8, qb8, path="cublas")


def test_blockwise_bf16_output_fallback_is_never_silent(monkeypatch):
    """A torch build whose F.scaled_mm refuses an fp32 output with blockwise scales gets a bf16
    sum cast to fp32: recorded as a fallback in ms.explain (and raised in strict mode), not
    under the plain path's name."""
    from microscale import backend
    qa = ms.quantize(torch.randn(128, 256), "fp8_block")
    qb = ms.quantize(torch.randn(128, 256), "fp8_block", block=(128, 128))

    def fake(*args, output_dtype, **kw):
        if output_dtype != torch.bfloat16:
            raise RuntimeError("only bf16 output")
        return torch.zeros(128, 128, dtype=torch.bfloat16)
    monkeypatch.setattr(gemm_fp8, "has_blockwise_scaled_mm", lambda: True)
    monkeypatch.setattr(gemm_fp8.F, "scaled_mm", fake)
    monkeypatch.setattr(gemm_fp8, "_PLAN", {})
    y = gemm_fp8._torch_blockwise(qa, qb, torch.float32)
    assert y.dtype == torch.float32
    path = backend.explain()[("scaled_mm", "fp8_blockxfp8_block")]
    assert "bf16 output cast to torch.float32" in path and "fallback" in path
    backend.set_strict(True)
    try:
        with pytest.raises(RuntimeError, match="strict"):
            gemm_fp8._torch_blockwise(qa, qb, torch.float32)
    finally:
        backend.set_strict(False)
    gemm_fp8._torch_blockwise(qa, qb, torch.bfloat16)          # asked for bf16: the plain path
    assert backend.explain()[("scaled_mm", "fp8_blockxfp8_block")] == \
        "F.scaled_mm blockwise (cuBLASLt)"


def test_strategy_heuristic_caps_the_temporaries():
    """dequant (faster everywhere measured) unless its bf16 copies would pass the cap."""
    cap = gemm_fp4.DEQUANT_MAX_TEMP_BYTES
    assert gemm_fp4.fp4_strategy(16384, 28672, 8192) == "dequant"
    assert gemm_fp4.fp4_strategy(64, 8192, 8192) == "dequant"
    k = 4096
    rows = cap // (2 * k)
    assert gemm_fp4.fp4_strategy(rows // 2, rows - rows // 2, k) == "dequant"
    assert gemm_fp4.fp4_strategy(rows // 2, rows - rows // 2 + 1, k) == "mainloop"


# ----------------------------------------------------------------------------- GPU
gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not HAS_CUDA or INTERPRET, reason="needs CUDA (no interpreter)")


@gpu
@needs_cuda
@pytest.mark.parametrize("key", sorted(FORMATS))
@pytest.mark.parametrize("mnk", [(1024, 2048, 1024), (1000, 1152, 640)])
def test_gpu_every_key(key, mnk):
    m, n, k = _shape_for(key, *mnk)
    qa, qb = _operands(key, m, n, k, device="cuda")
    ref = scaled_mm_reference(qa, qb)
    for out_dtype in (torch.float32, torch.bfloat16):
        y = ms.scaled_mm(qa, qb, out_dtype=out_dtype, backend="triton")
        assert y.dtype == out_dtype
        _assert_close(y, ref)


@gpu
@needs_cuda
@pytest.mark.parametrize("key", ["nvfp4xnvfp4", "mxfp4xmxfp4", "mxfp8_e4m3xmxfp8_e4m3"])
@pytest.mark.parametrize("strategy", ["mainloop", "dequant"])
def test_gpu_strategies(key, strategy):
    qa, qb = _operands(key, 2048, 1536, 2048, device="cuda")
    fn = gemm_fp4.scaled_mm_mxfp8 if key.startswith("mxfp8") else gemm_fp4.scaled_mm_fp4
    _assert_close(fn(qa, qb, strategy=strategy), scaled_mm_reference(qa, qb))


@gpu
@needs_cuda
@pytest.mark.parametrize("blocks", [((1, 128), (128, 128)), ((1, 128), (1, 128))])
@pytest.mark.parametrize("k", [1024, 11008])       # K/128 = 8 and 86 (not a multiple of 4)
def test_gpu_fp8_block_torch_and_triton(blocks, k):
    """cuBLAS blockwise through F.scaled_mm (where this torch has it) and the Triton kernel."""
    g = torch.Generator().manual_seed(5)
    a = torch.randn(512, k, generator=g).cuda()
    b = torch.randn(768, k, generator=g).cuda()
    qa = ms.quantize(a, "fp8_block", block=blocks[0], backend="reference")
    qb = ms.quantize(b, "fp8_block", block=blocks[1], backend="reference")
    ref = scaled_mm_reference(qa, qb)
    _assert_close(gemm_fp8.scaled_mm_fp8(qa, qb, path="triton"), ref)
    _assert_close(gemm_fp8.scaled_mm_fp8(qa, qb, path="triton", split_k=6), ref)   # K split
    if not gemm_fp8.has_blockwise_scaled_mm():
        pytest.skip("this torch has no F.scaled_mm blockwise scaling (Triton path checked)")
    _assert_close(gemm_fp8.scaled_mm_fp8(qa, qb, path="torch"), ref)
