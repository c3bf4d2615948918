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


def _compiled_graphs(layer, x, dy) -> tuple[list, torch.Tensor, torch.Tensor]:
    """The layer's forward and backward under ``torch.compile`` (AOTAutograd with the min-cut
    partitioner, graphs run as traced): ``(graphs, y, dx)``."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    graphs = []

    def keep(gm, _inputs):
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    backend = aot_autograd(fw_compiler=keep, bw_compiler=keep,
                           partition_fn=min_cut_rematerialization_partition)
    torch._dynamo.reset()
    x = x.detach().requires_grad_(True)
    y = torch.compile(layer, backend=backend, fullgraph=True)(x)
    y.backward(dy)
    return graphs, y.detach(), x.grad


def _from(graphs, func: str) -> int:
    return sum(func in (n.meta.get("stack_trace") or "") for g in graphs for n in g.graph.nodes)


def test_compiled_step_does_not_transpose_an_expanded_weights_scales(monkeypatch):
    """With one weight view, dgrad's Wᵀ is expanded and its GEMM reads no block scales
    (``ops_gemm._mm_scale``): under a compiler the transposed tile scales
    (``tensor.transpose_tile_scales``) are never computed, with the same bits as eager."""
    from microscale import ops_gemm
    torch.manual_seed(0)
    layer = ms.Linear(64, 48, recipe="nvfp4_no_sr")
    x = torch.randn(40, 64)
    dy = torch.linspace(-1, 1, 40 * 48).reshape(40, 48)
    xe = x.clone().requires_grad_(True)
    y_eager = layer(xe)
    y_eager.backward(dy)
    graphs, y, dx = _compiled_graphs(layer, x, dy)
    assert len(graphs) == 2 and _from(graphs, ", in t\n")      # W.t() was traced
    assert _from(graphs, "transpose_tile_scales") == 0
    assert torch.equal(y, y_eager.detach()) and torch.equal(dx, xe.grad)
    # the control: given the scales, the compiled step computes their transpose
    monkeypatch.setitem(ops_gemm.CONFIG, "SCALES_OF_EXPANDED", True)
    graphs, y, _ = _compiled_graphs(layer, x, dy)
    assert _from(graphs, "transpose_tile_scales") > 0 and torch.equal(y, y_eager.detach())
