"""One expert-weight view: every expert's NVFP4 16×16 W quantized once, expanded, and Wᵀ a view.

As ``nn.function``'s one weight view for a dense layer (``tests/test_weight_view.py``): the
grouped layer quantizes the stacked experts ``w [E, N, K]`` once into bf16 ``value ·
tile_scale`` and hands dgrad the experts' transposes as a view, which the Triton grouped GEMM
reads in place. Bit for bit: the view equals each expert's expanded Wᵀ, the GEMM on a strided
``b`` equals it on a contiguous copy, and a layer with one view equals one with two.
"""

from __future__ import annotations

import os

import pytest
import torch

import microscale as ms
from microscale import ops_experts
from microscale.nn import grouped as nn_grouped
from microscale.recipe import Recipe
from microscale.tensor import QFormat

INTERP = os.environ.get("TRITON_INTERPRET", "0") == "1"
needs_kernels = pytest.mark.skipif(not (INTERP or torch.cuda.is_available()),
                                   reason="Triton kernels: TRITON_INTERPRET=1 on CPU or CUDA")
NV2D = (QFormat.NVFP4, {"block_2d": True, "check_finite": False})
COUNTS = [5, 0, 37, 16]


def _w(e=3, n=64, k=96, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(e, n, k, generator=g) * torch.logspace(-2, 1, k)).to(torch.bfloat16)


@pytest.mark.parametrize("backend", ["reference", pytest.param("triton", marks=needs_kernels)])
def test_one_view_equals_each_experts_expanded_views(backend, monkeypatch):
    w = _w()
    q_w, q_wt = ops_experts.quantize_experts_one_view(w, NV2D, backend)
    if backend == "triton":                   # the per-segment kernel wrote it expanded
        assert "written expanded" in ms.explain()[("quantize_experts", "nvfp4")]
    assert q_w.data.dtype == torch.bfloat16 and q_wt.data.data_ptr() == q_w.data.data_ptr()
    monkeypatch.setattr(ops_experts, "_stackable", lambda *a: False)       # expert by expert
    exp = (NV2D[0], {**NV2D[1], "expand": True})
    want_w, want_wt = ops_experts.quantize_experts(w, exp, exp, "reference")
    for got, want in ((q_w, want_w), (q_wt, want_wt)):
        assert got.spec == want.spec and got.data.shape == want.data.shape
        assert torch.equal(got.data, want.data)                           # bit for bit
        assert torch.equal(got.scale.view(torch.uint8), want.scale.view(torch.uint8))
        assert torch.equal(got.amax, want.amax.float())


def test_transpose_refused_where_it_is_not_exact():
    q = ops_experts.quantize_experts(_w(), (QFormat.NVFP4, {"check_finite": False}), None,
                                     "reference")[0]
    with pytest.raises(ValueError, match="16x16"):
        ops_experts.transpose_experts(q)


@needs_kernels
@pytest.mark.parametrize("counts", [COUNTS, [0, 0, 3, 0]])
def test_grouped_gemm_reads_a_strided_b_in_place(counts):
    from microscale.kernels.gemm_grouped import grouped_gemm, grouped_gemm_reference
    dev = "cpu" if INTERP else "cuda"
    g = torch.Generator().manual_seed(1)
    e, n, k = len(counts), 48, 64
    a = torch.randint(-8, 9, (sum(counts), k), generator=g).to(torch.bfloat16).to(dev)
    b_kn = torch.randint(-8, 9, (e, k, n), generator=g).to(torch.bfloat16).to(dev)
    offs = torch.tensor(counts).cumsum(0).to(torch.int32).to(dev)
    b = b_kn.transpose(1, 2)                                 # [E, N, K], N-contiguous
    cfg = {"BM": 32, "BN": 32, "BK": 32, "num_warps": 4, "num_stages": 1}
    y = grouped_gemm(a, b, offs, "tokens", config=cfg)
    y_copy = grouped_gemm(a, b.reshape(e * n, k), offs, "tokens", config=cfg)
    assert torch.equal(y, y_copy)
    assert torch.equal(y.cpu(), grouped_gemm_reference(a.cpu(), b.cpu(), offs.cpu(), "tokens"))


def _step(recipe, one: bool, monkeypatch, dev="cpu", counts=COUNTS, n=64, k=96):
    monkeypatch.setitem(nn_grouped.CONFIG, "ONE_WEIGHT_VIEW", one)
    g = torch.Generator().manual_seed(2)
    e, t = len(counts), sum(counts)
    x = (torch.randn(t, k, generator=g) * 2).to(torch.bfloat16).to(dev).requires_grad_()
    w = (torch.randn(e, n, k, generator=g) * 0.05).to(dev).requires_grad_()
    dy = torch.randn(t, n, generator=g).to(torch.bfloat16).to(dev)
    seeds = torch.randint(0, 2**31 - 1, (e, 3), generator=g).to(dev)
    offs = torch.tensor(counts).cumsum(0).to(torch.int32).to(dev)
    y = ms.grouped_mm(x, w, offs, recipe, seeds=seeds)
    y.backward(dy)
    return y.detach(), x.grad, w.grad


@pytest.mark.parametrize("name", ["nvfp4", "nvfp4_no_sr"])
@pytest.mark.parametrize("backend", ["reference", pytest.param("triton", marks=needs_kernels)])
@pytest.mark.slow
def test_layer_with_one_view_equals_two(name, backend, monkeypatch):
    recipe = Recipe.from_name(name, backend=backend)
    assert nn_grouped.one_expert_view(ms.nn.function.Plan(recipe))
    calls, real = [], ops_experts.quantize_experts_one_view
    monkeypatch.setattr(nn_grouped, "quantize_experts_one_view",
                        lambda *a: calls.append(1) or real(*a))
    if backend == "triton":             # dgrad's grouped GEMM reads Wᵀ as a 3-D view
        from microscale.kernels import gemm_grouped
        seen, gemm = [], gemm_grouped.grouped_gemm
        monkeypatch.setattr(gemm_grouped, "grouped_gemm",
                            lambda a, b, *r, **k: seen.append(b.dim()) or gemm(a, b, *r, **k))
    one = _step(recipe, True, monkeypatch)
    assert calls                                               # the one-view path ran
    if backend == "triton":
        assert 3 in seen, seen
    two = _step(recipe, False, monkeypatch)
    assert len(calls) == 1
    for a, b in zip(one, two):
        assert torch.equal(a, b)


def test_decision():
    plan = ms.nn.function.Plan
    assert nn_grouped.one_expert_view(plan(Recipe.from_name("nvfp4")))
    for name in ("mxfp4", "mxfp8", "fp8_blockwise", "fp8_tensorwise"):
        assert not nn_grouped.one_expert_view(plan(Recipe.from_name(name))), name
    w1d = Recipe.from_name("nvfp4").with_operand("fprop", "b", block=(1, 16))
    assert not nn_grouped.one_expert_view(plan(w1d))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or INTERP, reason="needs CUDA")
@pytest.mark.parametrize("name", ["nvfp4", "nvfp4_no_sr"])
def test_gpu_layer_with_one_view_equals_two(name, monkeypatch):
    """moe-1b-like expert shapes on the GPU: the same bits with one view as with two."""
    recipe = Recipe.from_name(name)
    counts = [700, 0, 1300, 48, 2048]
    one = _step(recipe, True, monkeypatch, "cuda", counts, 1536, 1024)
    assert "written expanded" in ms.explain()[("quantize_experts", "nvfp4")]
    two = _step(recipe, False, monkeypatch, "cuda", counts, 1536, 1024)
    for a, b in zip(one, two):
        assert torch.equal(a, b)
