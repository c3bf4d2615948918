"""FP8 blockwise GEMMs through DeepGEMM (``kernels.gemm_deepgemm``), where installed.

On CPU: which calls it takes (and why not), the operands and layouts the glue hands it (a
stand-in module that computes the reference), the per-shape choice (timed, prior, always) with
the timer stood in, and that an error from it is a visible fallback. On a Hopper GPU with
``deep_gemm`` importable: both kinds against the reference, and a real timed choice.
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

ROW, TILE = (1, 128), (128, 128)


def _pair(m=256, n=384, k=512, device="cpu", block_b=TILE):
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(m, k, generator=g), torch.randn(n, k, generator=g)
    return (ms.quantize(a.to(device), "fp8_block", block=ROW, backend="reference"),
            ms.quantize(b.to(device), "fp8_block", block=block_b, backend="reference"))


@pytest.fixture
def fresh(monkeypatch):
    """This test's choices, errors and path notes stay in this test."""
    monkeypatch.setattr(gemm_deepgemm, "_CHOSEN", {})
    monkeypatch.setattr(gemm_deepgemm, "_BROKEN", {})
    monkeypatch.setattr(backend, "_PATHS", {})
    monkeypatch.setitem(gemm_deepgemm.CONFIG, "ENABLED", True)


def _stand_in(calls: list, ref: torch.Tensor):
    """A ``deep_gemm`` that checks what DeepGEMM checks and writes ``ref`` (the product)."""
    def fp8_gemm_nt(a, b, d, c=None, recipe=None):
        (x, sx), (w, sw) = a, b
        assert sx.stride(0) == 1 and sx.shape == (x.shape[0], x.shape[1] // 128)   # M-major
        if recipe == (1, 1, 128):         # wgrad: fp32, accumulated into zeros, B's M-major
            assert d.dtype == torch.float32 and c is d and not d.any()
            assert sw.stride(0) == 1 and sw.shape == (w.shape[0], w.shape[1] // 128)
            d.add_(ref)
        else:
            assert recipe == (1, 128, 128) and d.dtype == torch.bfloat16 and c is None
            assert sw.is_contiguous() or sw.t().is_contiguous()
            d.copy_(ref)
        calls.append((recipe, x.shape, w.shape))
    return types.SimpleNamespace(fp8_gemm_nt=fp8_gemm_nt)


def test_refuses_names_the_reason(monkeypatch, fresh):
    qa, qb = _pair()
    qa2, qb1 = _pair(block_b=ROW)
    assert gemm_deepgemm.kind_of(qa, qb) == "1d2d" and gemm_deepgemm.kind_of(qa2, qb1) == "1d1d"
    assert "Hopper" in gemm_deepgemm.refuses(qa, qb, torch.bfloat16)          # CPU tensors
    assert "Hopper" in gemm_deepgemm.refuses(qa2, qb1, torch.float32)
    assert "writes torch.bfloat16" in gemm_deepgemm.refuses(qa, qb, torch.float32)
    assert "writes torch.float32" in gemm_deepgemm.refuses(qa2, qb1, torch.bfloat16)
    assert "(128, 128) x (128, 128)" in gemm_deepgemm.refuses(qb, qb, torch.bfloat16)
    gemm_deepgemm.turn_off("1d1d", "RuntimeError: boom")
    assert "boom" in gemm_deepgemm.refuses(qa2, qb1, torch.float32)
    assert "Hopper" in gemm_deepgemm.refuses(qa, qb, torch.bfloat16)          # 1d2d still on
    monkeypatch.setitem(gemm_deepgemm.CONFIG, "ENABLED", False)
    assert "off" in gemm_deepgemm.refuses(qa, qb, torch.bfloat16)


@pytest.mark.parametrize("block_b", [TILE, ROW])
def test_glue_hands_deepgemm_our_layouts(monkeypatch, block_b):
    """The codes as they are, 1×128 scales M-major, 128×128 contiguous; a bf16 output for
    1d2d, an fp32 one for 1d1d, accumulated into zeros."""
    qa, qb = _pair(block_b=block_b)
    wgrad = block_b == ROW
    ref = scaled_mm_reference(qa, qb).to(torch.float32 if wgrad else torch.bfloat16)
    calls = []
    monkeypatch.setattr(gemm_deepgemm, "_MODULE", [_stand_in(calls, ref), ""])
    qa_rowmajor = dataclasses.replace(qa, scale=qa.scale.contiguous())
    assert qa_rowmajor.scale.stride(0) != 1
    qb_rowmajor = dataclasses.replace(qb, scale=qb.scale.contiguous())
    for q, r in ((qa, qb), (qa_rowmajor, qb_rowmajor)):   # row-major scales made M-major
        y = gemm_deepgemm.scaled_mm_deepgemm(q, r)
        assert y.dtype == ref.dtype and torch.equal(y, ref)
    recipe = (1, 1, 128) if wgrad else (1, 128, 128)
    assert calls == [(recipe, qa.data.shape, qb.data.shape)] * 2


def test_choice_modes(monkeypatch, fresh):
    """always: DeepGEMM; prior: session 48's rule; timed: the faster on the GPU's clock,
    decided once per shape and kept; where no sync is allowed, the prior, not kept."""
    qa, qb = _pair()
    qa2, qb1 = _pair(block_b=ROW)
    timed = []

    def cublas():
        raise AssertionError("not run: the timer is stood in")

    def fake_us(fn, calls):                 # DeepGEMM 50 us, cuBLASLt 80 us
        timed.append(fn)
        return 80.0 if fn is cublas else 50.0
    monkeypatch.setattr(gemm_deepgemm, "_gpu_us", fake_us)
    for mode, expect in (("always", (True, True)), ("prior", (True, False))):
        monkeypatch.setitem(gemm_deepgemm.CONFIG, "CHOICE", mode)
        assert (gemm_deepgemm.prefers(qa, qb, cublas)[0],
                gemm_deepgemm.prefers(qa2, qb1, cublas)[0]) == expect
    assert not timed and not gemm_deepgemm.choices()
    monkeypatch.setitem(gemm_deepgemm.CONFIG, "CHOICE", "timed")
    monkeypatch.setattr(gemm_deepgemm, "_can_sync", lambda: False)      # e.g. capturing
    assert gemm_deepgemm.prefers(qa2, qb1, cublas) == (False, "untimed: session 48's rule "
                                                             "for 1d1d")
    assert not timed and not gemm_deepgemm.choices()
    monkeypatch.setattr(gemm_deepgemm, "_can_sync", lambda: True)
    use, why = gemm_deepgemm.prefers(qa2, qb1, cublas)                # DeepGEMM 50 < 80 us
    assert use and "256x384x512: 50.0 us, cuBLASLt 80.0 us" in why and len(timed) == 2
    assert gemm_deepgemm.prefers(qa2, qb1, cublas) == (use, why) and len(timed) == 2   # kept
    assert gemm_deepgemm.choices() == {("1d1d", 256, 384, 512, "cpu"): (use, why)}
    monkeypatch.setattr(gemm_deepgemm, "_gpu_us", lambda fn, calls: 80.0 if fn is cublas else 90.0)
    assert gemm_deepgemm.prefers(qa, qb, cublas)[0] is False           # 90 > 80: cuBLASLt
    qa3, qb3 = _pair(m=128, block_b=ROW)

    def no_blockwise():
        raise gemm_fp8.KernelUnsupported("this torch has no F.scaled_mm with blockwise scaling")
    monkeypatch.setattr(gemm_deepgemm, "_gpu_us", lambda fn, calls: fn() or 10.0)
    monkeypatch.setattr(gemm_deepgemm, "scaled_mm_deepgemm", lambda qa, qb: None)
    use, why = gemm_deepgemm.prefers(qa3, qb3, no_blockwise)          # cuBLASLt cannot run it
    assert use and "could not run it" in why and "no F.scaled_mm" in why
    monkeypatch.setitem(gemm_deepgemm.CONFIG, "CHOICE", "fastest")
    with pytest.raises(ValueError, match="CHOICE"):
        gemm_deepgemm.prefers(qa, qb, cublas)


@pytest.mark.parametrize("dg_us,expect_dg", [(50.0, True), (90.0, False)])
def test_dispatch_follows_the_timing(monkeypatch, fresh, dg_us, expect_dg):
    """Through ``gemm_fp8._deepgemm``: the timed winner runs the call (None: cuBLASLt does),
    and ms.explain names the timing behind a DeepGEMM entry."""
    qa, qb = _pair(block_b=ROW)
    ref = scaled_mm_reference(qa, qb)
    calls = []
    monkeypatch.setattr(gemm_deepgemm, "refuses", lambda *a: None)
    monkeypatch.setattr(gemm_deepgemm, "_MODULE", [_stand_in(calls, ref), ""])
    monkeypatch.setattr(gemm_deepgemm, "_can_sync", lambda: True)
    monkeypatch.setattr(gemm_fp8, "_torch_blockwise", lambda *a: ref)
    monkeypatch.setattr(gemm_deepgemm, "_gpu_us", _fake_timer(dg_us, 80.0))
    y = gemm_fp8._deepgemm(qa, qb, torch.float32)
    assert (y is not None) == expect_dg and bool(calls) == expect_dg
    key = ("scaled_mm", gemm_deepgemm.PATH_KEYS["1d1d"])
    if expect_dg:
        assert torch.equal(y, ref) and "timed at 256x384x512: 50.0 us" in backend.explain()[key]
    else:
        assert key not in backend.explain()


def _fake_timer(dg_us: float, cublas_us: float):
    """A ``_gpu_us`` that runs nothing and reports these times (DeepGEMM's call is timed
    first, then cuBLASLt's)."""
    order = []

    def fake(fn, calls):
        order.append(fn)
        return dg_us if len(order) % 2 else cublas_us
    return fake


def test_error_falls_back_to_cublas_visibly(monkeypatch, fresh):
    """An error from DeepGEMM: cuBLASLt runs the call, ms.explain says so, strict mode raises,
    and that kind is switched off for the process (no retry per call)."""
    qa, qb = _pair()

    def broken(*args, **kw):
        raise RuntimeError("Assertion error: sfb layout")
    monkeypatch.setattr(gemm_deepgemm, "refuses", lambda *a: None)
    monkeypatch.setattr(gemm_deepgemm, "_MODULE", [types.SimpleNamespace(fp8_gemm_nt=broken), ""])
    monkeypatch.setitem(gemm_deepgemm.CONFIG, "CHOICE", "always")
    backend.set_strict(True)
    try:
        with pytest.raises(RuntimeError, match="strict"):
            gemm_fp8._deepgemm(qa, qb, torch.bfloat16)
    finally:
        backend.set_strict(False)
    assert gemm_fp8._deepgemm(qa, qb, torch.bfloat16) is None
    assert "sfb layout" in gemm_deepgemm._BROKEN["1d2d"] and "1d1d" not in gemm_deepgemm._BROKEN
    path = backend.explain()[("scaled_mm", gemm_deepgemm.PATH_KEYS["1d2d"])]
    assert "fallback" in path and "sfb layout" in path and "cuBLASLt" in path


def test_explain_of_a_model_shows_the_deepgemm_entries(monkeypatch, fresh):
    """``ms.explain(model)`` keeps the entries of the model's op keys, DeepGEMM's
    ``"fp8_blockxfp8_block 1x128·128x128"`` / ``1x128·1x128`` beside cuBLASLt's."""
    model = torch.nn.Sequential(torch.nn.Linear(256, 256, bias=False))
    ms.convert(model, "fp8_blockwise", keep_high_precision=[])
    for kind, key in gemm_deepgemm.PATH_KEYS.items():
        backend.note_path("scaled_mm", key, f"DeepGEMM fp8_gemm_nt {kind} (test)")
    backend.note_path("scaled_mm", "nvfp4xnvfp4 detail", "not this model's")
    report = ms.explain(model)
    for kind, key in gemm_deepgemm.PATH_KEYS.items():
        assert report[("scaled_mm", key)] == f"DeepGEMM fp8_gemm_nt {kind} (test)"
    assert ("scaled_mm", "nvfp4xnvfp4 detail") not in report


HAS_DG = torch.cuda.is_available() and gemm_deepgemm.deepgemm_module() is not None
needs_dg = pytest.mark.skipif(not HAS_DG, reason="needs a CUDA GPU with deep_gemm importable")


def _hopper():
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("DeepGEMM's path here is for sm_90")


@pytest.mark.parametrize("mnk,block_b", [((512, 768, 1024), TILE), ((1000, 1152, 11008), TILE),
                                         ((16384, 512, 2048), TILE), ((768, 3072, 16384), ROW),
                                         ((1152, 256, 1024), ROW)])
@pytest.mark.gpu
@needs_dg
def test_gpu_deepgemm_matches_reference(monkeypatch, fresh, mnk, block_b):
    """Both kinds through the dispatch (K/128 = 86: not a multiple of 4; 1000 rows): DeepGEMM
    takes them (ms.explain), within the GEMM tolerance of the reference."""
    _hopper()
    monkeypatch.setitem(gemm_deepgemm.CONFIG, "CHOICE", "always")
    qa, qb = _pair(*mnk, device="cuda", block_b=block_b)
    out = torch.float32 if block_b == ROW else torch.bfloat16
    y = gemm_fp8.scaled_mm_fp8(qa, qb, out)
    assert y.dtype == out
    ref = scaled_mm_reference(qa, qb)
    key = gemm_deepgemm.PATH_KEYS[gemm_deepgemm.kind_of(qa, qb)]
    assert backend.explain()[("scaled_mm", key)].startswith("DeepGEMM")
    rms = ref.pow(2).mean().sqrt()
    torch.testing.assert_close(y.float(), ref, atol=8e-3 * rms.item(), rtol=8e-3)


@pytest.mark.gpu
@needs_dg
def test_gpu_timed_choice_is_kept_and_never_syncs_again(monkeypatch, fresh):
    """The first call of a shape times both GEMMs; the next calls take the kept choice without
    a host sync, and give the same bits as cuBLASLt's."""
    _hopper()
    monkeypatch.setitem(gemm_deepgemm.CONFIG, "CHOICE", "timed")
    qa, qb = _pair(768, 3072, 4096, device="cuda", block_b=ROW)
    first = gemm_fp8.scaled_mm_fp8(qa, qb, torch.float32)
    (key, (use, why)), = gemm_deepgemm.choices().items()
    assert key == ("1d1d", 768, 3072, 4096, str(qa.device)) and "cuBLASLt" in why
    torch.cuda.set_sync_debug_mode("error")
    try:
        again = gemm_fp8.scaled_mm_fp8(qa, qb, torch.float32)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    cublas = gemm_fp8._torch_blockwise(qa, qb, torch.float32)
    assert torch.equal(first, again) and torch.equal(again, cublas)
