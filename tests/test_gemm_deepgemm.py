"""FP8 blockwise fprop/dgrad through DeepGEMM (``kernels.gemm_deepgemm``), where installed.

On CPU: which calls it takes (and why not), the operands and layouts the glue hands it (a
stand-in module that computes the reference), and that an error from it is a visible
fallback. On a Hopper GPU with ``deep_gemm`` importable: against the reference.
"""

from __future__ import annotations

import dataclasses
import types

import pytest
import torch

import microscale as ms
from microscale import backend
from microscale.gemm import scaled_mm_reference
from microscale.kernels import gemm_deepgemm, gemm_fp8


def _pair(m=256, n=384, k=512, device="cpu"):
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(m, k, generator=g), torch.randn(n, k, generator=g)
    return (ms.quantize(a.to(device), "fp8_block", block=(1, 128), backend="reference"),
            ms.quantize(b.to(device), "fp8_block", block=(128, 128), backend="reference"))


def _stand_in(calls: list, ref: torch.Tensor):
    """A ``deep_gemm`` that checks what DeepGEMM checks and writes ``ref`` (the product)."""
    def fp8_gemm_nt(a, b, d, recipe):
        (x, sx), (w, sw) = a, b
        assert recipe == (1, 128, 128) and d.dtype == torch.bfloat16
        assert sx.stride(0) == 1 and sx.shape == (x.shape[0], x.shape[1] // 128)   # M-major
        assert sw.is_contiguous() or sw.t().is_contiguous()
        calls.append((x.shape, w.shape))
        d.copy_(ref)
    return types.SimpleNamespace(fp8_gemm_nt=fp8_gemm_nt)


def test_refuses_names_the_reason(monkeypatch):
    qa, qb = _pair()
    assert "Hopper" in gemm_deepgemm.refuses(qa, qb, torch.bfloat16)          # CPU tensors
    assert "bf16" in gemm_deepgemm.refuses(qa, qb, torch.float32)
    qa_col = ms.quantize(torch.randn(384, 512), "fp8_block", block=(1, 128))
    assert "(1, 128) x (1, 128)" in gemm_deepgemm.refuses(qa, qa_col, torch.bfloat16)
    monkeypatch.setitem(gemm_deepgemm.CONFIG, "ENABLED", False)
    assert "off" in gemm_deepgemm.refuses(qa, qb, torch.bfloat16)


def test_glue_hands_deepgemm_our_layouts(monkeypatch):
    """The codes as they are, A's scales M-major, B's contiguous, a bf16 [M, N] output."""
    qa, qb = _pair()
    ref = scaled_mm_reference(qa, qb).to(torch.bfloat16)
    calls = []
    monkeypatch.setattr(gemm_deepgemm, "_MODULE", [_stand_in(calls, ref), ""])
    qa_rowmajor = dataclasses.replace(qa, scale=qa.scale.contiguous())
    assert qa_rowmajor.scale.stride(0) != 1
    for q in (qa, qa_rowmajor):          # a row-major scale is made M-major for it
        y = gemm_deepgemm.scaled_mm_deepgemm(q, qb)
        assert y.dtype == torch.bfloat16 and torch.equal(y, ref)
    assert calls == [(qa.data.shape, qb.data.shape)] * 2


def test_error_falls_back_to_cublas_visibly(monkeypatch):
    """An error from DeepGEMM: cuBLASLt runs the call, ms.explain says so, strict mode raises,
    and DeepGEMM is switched off for the process (no retry per call)."""
    qa, qb = _pair()
    monkeypatch.setattr(backend, "_PATHS", {})         # this test's notes stay in this test

    def broken(*args, **kw):
        raise RuntimeError("Assertion error: sfb layout")
    monkeypatch.setattr(gemm_deepgemm, "refuses", lambda *a: None)
    monkeypatch.setattr(gemm_deepgemm, "_MODULE", [types.SimpleNamespace(fp8_gemm_nt=broken), ""])
    monkeypatch.setitem(gemm_deepgemm.CONFIG, "ENABLED", True)
    backend.set_strict(True)
    try:
        with pytest.raises(RuntimeError, match="strict"):
            gemm_fp8._deepgemm(qa, qb, torch.bfloat16)
    finally:
        backend.set_strict(False)
    monkeypatch.setitem(gemm_deepgemm.CONFIG, "ENABLED", True)
    assert gemm_fp8._deepgemm(qa, qb, torch.bfloat16) is None
    assert not gemm_deepgemm.CONFIG["ENABLED"]
    path = backend.explain()[("scaled_mm", gemm_deepgemm.PATH_KEY)]
    assert "fallback" in path and "sfb layout" in path and "cuBLASLt" in path


HAS_DG = torch.cuda.is_available() and gemm_deepgemm.deepgemm_module() is not None


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_DG, reason="needs a CUDA GPU with deep_gemm importable")
@pytest.mark.parametrize("mnk", [(512, 768, 1024), (1000, 1152, 11008), (16384, 512, 2048)])
def test_gpu_deepgemm_matches_reference(mnk):
    """fprop/dgrad shapes (K/128 = 86: not a multiple of 4; 1000 rows), through the dispatch:
    DeepGEMM takes them (ms.explain), within the GEMM tolerance of the reference."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("DeepGEMM's path here is for sm_90")
    qa, qb = _pair(*mnk, device="cuda")
    y = gemm_fp8.scaled_mm_fp8(qa, qb, torch.bfloat16)
    ref = scaled_mm_reference(qa, qb)
    assert backend.explain()[("scaled_mm", gemm_deepgemm.PATH_KEY)].startswith("DeepGEMM")
    rms = ref.pow(2).mean().sqrt()
    torch.testing.assert_close(y.float(), ref, atol=8e-3 * rms.item(), rtol=8e-3)


def test_explain_of_a_model_shows_the_deepgemm_entry(monkeypatch):
    """``ms.explain(model)`` keeps the entries of the model's op keys, DeepGEMM's
    ``"fp8_blockxfp8_block 1x128·128x128"`` beside cuBLASLt's ``fp8_blockxfp8_block``."""
    monkeypatch.setattr(backend, "_PATHS", {})
    model = torch.nn.Sequential(torch.nn.Linear(256, 256, bias=False))
    ms.convert(model, "fp8_blockwise", keep_high_precision=[])
    backend.note_path("scaled_mm", gemm_deepgemm.PATH_KEY, "DeepGEMM fp8_gemm_nt (test)")
    backend.note_path("scaled_mm", "nvfp4xnvfp4 detail", "not this model's")
    assert ms.explain(model)[("scaled_mm", gemm_deepgemm.PATH_KEY)] == "DeepGEMM fp8_gemm_nt (test)"
    assert ("scaled_mm", "nvfp4xnvfp4 detail") not in ms.explain(model)
