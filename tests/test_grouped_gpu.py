"""ms.grouped_mm on CUDA: the sync-free path equals the reference (bit-exact quantized operands,
GEMMs within tolerance), a zoo MoE training step makes no host sync, and it compiles.
GPU only (``-m gpu``); the CPU twins are in ``test_grouped.py`` (Triton's interpreter)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import microscale as ms
from microscale.kernels import grouped as fast
from microscale.ops_grouped import quantize_grouped_reference
from microscale.quant.grouped import group_layout, segment_sr_bytes
from microscale.recipe import Recipe
from microscale.train.model import build_model

pytestmark = pytest.mark.gpu
COUNTS = [300, 0, 77, 1024, 5, 0, 519, 96]        # empty experts, counts off every block


def _inputs(k: int = 256, n: int = 384, seed: int = 0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    T, E = sum(COUNTS), len(COUNTS)
    x = torch.randn(T, k, device="cuda", generator=g).to(torch.bfloat16)
    w = torch.randn(E, n, k, device="cuda", generator=g) * k ** -0.5
    dy = torch.randn(T, n, device="cuda", generator=g).to(torch.bfloat16)
    offs = torch.tensor(COUNTS, device="cuda").cumsum(0).to(torch.int32)
    return x, w, dy, offs, torch.randint(0, 2**31 - 1, (E, 3), device="cuda", generator=g)


@pytest.mark.parametrize("name", ["nvfp4", "mxfp4", "mxfp8", "fp8_blockwise", "fp8_tensorwise"])
def test_sync_free_quantizer_bit_exact_on_cuda(name):
    recipe = Recipe.from_name(name)
    x, _, _, offs, seeds = _inputs()
    m = recipe.required_multiples()["tokens"]
    lay = group_layout(offs, x.shape[0], m)
    rg, cg = lay.row_groups(), lay.col_groups()
    ops = (recipe.dgrad.a, recipe.wgrad.a)
    views = [(op.format, op.quantize_kwargs() | {"check_finite": False}) for op in ops]
    row_bits = segment_sr_bytes(rg, lay.starts, lay.counts, tuple(x.shape), "rows", seeds[:, 2])
    col_bits = segment_sr_bytes(cg, lay.pad_starts, lay.pad_counts, (x.shape[1], lay.bound),
                                "cols", seeds[:, 2] + 1)
    # NVFP4 views draw in-kernel Philox unless given bytes (their stream: test_grouped_nvfp4_reg)
    given = (row_bits, col_bits) if name == "nvfp4" else (None, None)
    got = fast.quantize_grouped_fast(x, offs, *views, m, seeds[:, 2], *given, None, None,
                                     "auto")
    want = quantize_grouped_reference(x, offs, *views, m, seeds[:, 2], row_bits, col_bits, None,
                                      None)
    for g, r in zip(got, want):
        for a, b in zip(g, r):
            a8 = a.view(torch.uint8) if a.dtype.itemsize == 1 else a
            b8 = b.view(torch.uint8) if b.dtype.itemsize == 1 else b
            assert torch.equal(a8, b8), name


@pytest.mark.parametrize("name", ["nvfp4_no_sr", "mxfp8", "fp8_blockwise", "fp8_tensorwise"])
def test_sync_free_layer_matches_reference_on_cuda(name):
    x, w, dy, offs, seeds = _inputs(seed=1)
    out = []
    for backend in ("reference", "auto"):
        xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
        y = ms.grouped_mm(xg, wg, offs, Recipe.from_name(name, backend=backend), seeds=seeds)
        y.backward(dy)
        out.append((y.float(), xg.grad.float(), wg.grad))
    for a, b in zip(*out):
        # FP8 blockwise runs on FP8 tensor cores, whose 128-product chains keep ~14 bits below
        # their largest term (SPEC N5): an absolute error relative to the tensor's scale
        slack = 2.0 ** -10 * b.abs().max().item() if name == "fp8_blockwise" else 0.0
        torch.testing.assert_close(a, b, atol=8e-3 + slack, rtol=8e-3)
    assert "sync-free" in str(ms.explain())


@pytest.mark.parametrize("recipe", ["nvfp4", "fp8_blockwise", "mxfp8", "fp8_delayed"])
def test_moe_training_step_has_no_host_sync(recipe):
    torch.manual_seed(0)
    model = build_model("moe-tiny")
    ms.convert(model, recipe, keep_high_precision=[])
    model.cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    x = torch.randint(0, 256, (4, 128), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x).flatten(0, 1), x.roll(-1, 1).flatten())
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()
    step()                                               # warm-up: Triton JIT, caches
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        loss = step()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert torch.isfinite(loss).item()


def test_grouped_layer_compiles_with_inductor():
    torch._dynamo.reset()
    x, w, dy, offs, _ = _inputs(seed=2)
    layer = ms.GroupedLinear(len(COUNTS), x.shape[1], w.shape[1], "nvfp4").cuda()
    run = torch.compile(lambda t, o: layer(t, o), fullgraph=True)
    xg = x.clone().requires_grad_()
    run(xg, offs).backward(dy)
    assert torch.isfinite(xg.grad).all().item() and torch.isfinite(layer.weight.grad).all().item()


def test_fp8_pair_kernels_equal_their_unfused_paths_on_cuda(monkeypatch):
    """The FP8 pairs that skip a pass, against the paths they replace, bit for bit with NaN and
    ±Inf in the input: the token pair read through the padded layout's row map (GATHER) vs the
    padded copy's pair gathered back; the experts' W and per-expert Wᵀ from one read
    (ops_experts PAIR_KERNEL) vs W's bytes transposed."""
    from microscale import ops_experts
    x, w, _, offs, _ = _inputs(seed=2)
    x[0, 0], x[-1, -1], x[400, 7] = float("nan"), float("inf"), float("-inf")
    w[1, 5, 9], w[3, 0, 0], w[7, -1, -1] = float("nan"), float("inf"), float("-inf")
    recipe = Recipe.from_name("fp8_blockwise")
    tok = [(op.format, op.quantize_kwargs() | {"check_finite": False})
           for op in (recipe.fprop.a, recipe.wgrad.b)]
    wts = [(op.format, op.quantize_kwargs() | {"check_finite": False})
           for op in (recipe.fprop.b, recipe.dgrad.b)]
    runs = {}
    for fused in (True, False):
        monkeypatch.setitem(fast.CONFIG, "GATHER", fused)
        monkeypatch.setitem(ops_experts.CONFIG, "PAIR_KERNEL", fused)
        q_tok = fast.quantize_grouped_fast(x, offs, *tok, 128, None, None, None, None, None,
                                           "auto")
        q_w = ops_experts.quantize_experts(w, *wts, "auto")
        runs[fused] = [t for q in q_tok for t in q] + \
            [t for q in q_w for t in (q.data, q.scale, q.amax)]
        paths = str(ms.explain())            # the last call's path of each op
        assert ("row map" in paths and "pair kernel" in paths) == fused
    for a, b in zip(runs[True], runs[False]):
        a8 = a.view(torch.uint8) if a.dtype.itemsize == 1 else a
        b8 = b.view(torch.uint8) if b.dtype.itemsize == 1 else b
        assert a.shape == b.shape and torch.equal(a8.nan_to_num(), b8.nan_to_num())
