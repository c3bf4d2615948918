"""One weight view: an NVFP4 16×16 weight quantized once, expanded, its transpose a view.

Where both of W's GEMMs decode NVFP4 to bf16 (``nn.function.one_weight_view``), the layer
quantizes W once into the expanded form and hands dgrad its transpose. Bit for bit: the
transposed view equals the expanded quantization of Wᵀ (SPEC §3), a layer with one view equals
a layer with two (outputs and gradients), and the saved Wᵀ is a view of W's data.
"""

from __future__ import annotations

import pytest
import torch

import microscale as ms
from microscale.nn import function, saved
from microscale.ops import quantize_views
from microscale.tensor import QFormat

NV2D = (QFormat.NVFP4, {"block_2d": True, "check_finite": False})
CPU = torch.device("cpu")


def _w(shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g) * torch.logspace(-2, 2, shape[1])


@pytest.mark.parametrize("shape", [(64, 48), (32, 96)])
def test_transposed_expanded_view_is_the_quantized_transpose(shape):
    w = _w(shape)
    q_w, q_wt = quantize_views(w, NV2D, NV2D, "reference")          # two views, as codes
    one, _ = quantize_views(w, (NV2D[0], {**NV2D[1], "expand": True}), None, "reference")
    t = one.t()
    assert t.expanded and t.shape == q_wt.shape and t.data.data_ptr() == one.data.data_ptr()
    assert torch.equal(t.data, q_wt.expand().data)                   # bit for bit
    assert torch.equal(t.scale.view(torch.uint8), q_wt.scale.view(torch.uint8))
    assert torch.equal(t.amax, q_wt.amax)
    assert torch.equal(one.data, q_w.expand().data)


def test_transpose_refused_where_it_is_not_exact():
    w = _w((32, 64))
    row, _ = quantize_views(w, (QFormat.NVFP4, {"check_finite": False, "expand": True}), None,
                            "reference")
    with pytest.raises(ValueError, match="square 2D tiles"):
        row.t()                                           # 1×16 blocks: not a transpose


def test_saved_expanded_operand_round_trips():
    one, _ = quantize_views(_w((32, 48)), (NV2D[0], {**NV2D[1], "expand": True}), None,
                            "reference")
    kept = []
    meta = saved._stash(one.t(), kept)
    back = saved._unstash(meta, kept)
    assert back.expanded and torch.equal(back.data, one.t().data)


def test_decision():
    nvfp4 = function.Plan(ms.Recipe.from_name("nvfp4"))
    assert function.one_weight_view(nvfp4, 256, (64, 128), CPU)
    assert function.one_weight_view(function.Plan(ms.Recipe.from_name("nvfp4_no_sr")), 256,
                                    (64, 128), CPU)
    for name in ("mxfp4", "mxfp8", "fp8_blockwise", "fp8_tensorwise"):
        assert not function.one_weight_view(function.Plan(ms.Recipe.from_name(name)), 256,
                                            (64, 128), CPU), name
    w1d = ms.Recipe.from_name("nvfp4").with_operand("fprop", "b", block=(1, 16))
    assert not function.one_weight_view(function.Plan(w1d), 256, (64, 128), CPU)
    old = function.CONFIG["ONE_WEIGHT_VIEW"]
    function.CONFIG["ONE_WEIGHT_VIEW"] = False
    try:
        assert not function.one_weight_view(nvfp4, 256, (64, 128), CPU)
    finally:
        function.CONFIG["ONE_WEIGHT_VIEW"] = old


def _step(recipe: str, one: bool, device: str, monkeypatch, shape=(48, 64), tokens=40,
          sync_check: bool = False):
    """Forward + backward (a second one with ``sync_check``, under
    ``set_sync_debug_mode("error")``); returns (y, dx, dW, W's views as the layer took them)."""
    monkeypatch.setitem(function.CONFIG, "ONE_WEIGHT_VIEW", one)
    taken, real = [], function.weight_views
    monkeypatch.setattr(function, "weight_views",
                        lambda *a, **k: taken.append(real(*a, **k)) or taken[-1])
    torch.manual_seed(0)
    layer = ms.Linear(shape[1], shape[0], recipe=recipe).to(device)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    x = torch.randn(tokens, shape[1], device=device, dtype=dtype, requires_grad=True)
    dy = torch.linspace(-1, 1, tokens * shape[0], device=device).reshape(tokens, -1).to(dtype)
    for checked in ((False, True) if sync_check else (False,)):
        x.grad, layer.weight.grad = None, None
        if checked:
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
        try:
            y = layer(x)
            fprop_path = ms.explain().get(("scaled_mm", "nvfp4xnvfp4"), "")
            y.backward(dy)
        finally:
            if checked:
                torch.cuda.set_sync_debug_mode(0)
    return y.detach(), x.grad, layer.weight.grad, (*taken[-1], fprop_path)


@pytest.mark.parametrize("recipe", ["nvfp4", "nvfp4_no_sr"])
def test_layer_with_one_view_equals_two(recipe, monkeypatch):
    *one, (q_w, q_wt, _) = _step(recipe, True, "cpu", monkeypatch)
    assert q_w.expanded and q_wt.expanded and q_wt.data.data_ptr() == q_w.data.data_ptr()
    *two, (p_w, p_wt, _) = _step(recipe, False, "cpu", monkeypatch)
    assert not p_w.expanded and not p_wt.expanded
    for a, b in zip(one, two):
        assert torch.equal(a, b)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("recipe", ["nvfp4", "nvfp4_no_sr"])
def test_gpu_layer_with_one_view_equals_two(recipe, monkeypatch):
    """At a training shape on the GPU: one view taken (and no dequantize pass for B), the same
    bits as two views, no host sync."""
    shape, tokens = (1024, 768), 4096
    *one, (q_w, q_wt, fprop_path) = _step(recipe, True, "cuda", monkeypatch, shape, tokens,
                                          True)
    assert q_w.expanded and q_wt.data.stride(0) == 1
    assert "A and B given expanded" in fprop_path, fprop_path     # no dequantize pass for W
    *two, _ = _step(recipe, False, "cuda", monkeypatch, shape, tokens, True)
    for a, b in zip(one, two):
        assert torch.equal(a, b)
