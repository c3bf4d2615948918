"""ms.grouped_mm: every expert equals ms.Linear on its tokens (all presets, empty experts, token
counts off the block); the sync-free path equals the reference bit for bit without reading the
group sizes; argument errors; custom-op fakes and a fullgraph trace."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

import microscale as ms
from microscale.kernels import grouped as fast
from microscale.nn.function import Plan, linear
from microscale.ops import quantize_views
from microscale.ops_grouped import quantize_grouped_reference
from microscale.quant.grouped import _local_index, group_layout, padded_bound, segment_rand_bits
from microscale.recipe import PRESETS, Recipe
from microscale.tensor import QFormat

pytestmark = pytest.mark.usefixtures("single_thread")   # chains of small ops: one thread
INTERP = os.environ.get("TRITON_INTERPRET", "0") == "1"
needs_interp = pytest.mark.skipif(not (INTERP or torch.cuda.is_available()),
                                  reason="the sync-free path runs as backend='triton': needs "
                                  "TRITON_INTERPRET=1 on CPU")
COUNTS = [5, 0, 37, 16, 0]          # an empty expert, counts off every block, an empty last one
K = N = 128                         # FP8 128x128 weight tiles need 128


def _offs(counts=COUNTS) -> torch.Tensor:
    return torch.tensor(counts).cumsum(0).to(torch.int32)


def _inputs(seed: int = 0, counts=COUNTS, k: int = K, n: int = N):
    g = torch.Generator().manual_seed(seed)
    T, E = sum(counts), len(counts)
    x = torch.randn(T, k, generator=g).to(torch.bfloat16) * 2
    w = torch.randn(E, n, k, generator=g) * 0.05
    dy = torch.randn(T, n, generator=g).to(torch.bfloat16)
    seeds = torch.randint(0, 2**31 - 1, (E, 3), generator=g)
    return x, w, dy, seeds


def _bits(q):
    return q.view(torch.uint8) if q.dtype.itemsize == 1 else q


def _grouped_step(recipe, x, w, dy, seeds, state=None, counts=COUNTS):
    x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
    y = ms.grouped_mm(x, w, _offs(counts), recipe, seeds=seeds, state=state)
    y.backward(dy)
    return y.detach(), x.grad, w.grad


@pytest.mark.parametrize("name", [p for p in PRESETS if p != "fp8_delayed"])
def test_each_expert_equals_linear(name):
    """Reference backend: y, dx, dW of every expert = nn.function.linear with that expert's
    weight and seeds (bit-exact operands; GEMMs within the usual tolerance)."""
    recipe = Recipe.from_name(name)
    x, w, dy, seeds = _inputs()
    y, dx, dw = _grouped_step(recipe, x, w, dy, seeds)
    start = 0
    for e, count in enumerate(COUNTS):
        x_e = x[start:start + count].clone().requires_grad_()
        w_e = w[e].clone().requires_grad_()
        y_e = linear(x_e, w_e, None, Plan(recipe), {}, seeds[e], True)
        y_e.backward(dy[start:start + count])
        rows = slice(start, start + count)
        torch.testing.assert_close(y[rows].float(), y_e.float(), atol=8e-3, rtol=8e-3)
        torch.testing.assert_close(dx[rows].float(), x_e.grad.float(), atol=8e-3, rtol=8e-3)
        torch.testing.assert_close(dw[e], w_e.grad, atol=8e-3, rtol=8e-3)
        if count == 0:
            assert torch.equal(dw[e], torch.zeros_like(dw[e]))      # no tokens, no gradient
        start += count


@pytest.mark.parametrize("name", ["nvfp4", "mxfp4", "fp8_blockwise", "fp8_tensorwise"])
def test_grouped_operands_bit_exact_per_expert(name):
    """The grouped row and padded column views hold, per expert, exactly the codes and scales
    ms.Linear's quantize_rowcol gives for that expert's zero-padded tokens (SR included)."""
    recipe = Recipe.from_name(name)
    x, _, _, seeds = _inputs()
    m = recipe.required_multiples()["tokens"]
    views = [(op.format, op.quantize_kwargs() | {"check_finite": False})
             for op in (recipe.dgrad.a, recipe.wgrad.a)]
    q_row, q_col = quantize_grouped_reference(x, _offs(), *views, m, seeds[:, 2], None, None,
                                              None, None)
    lay = group_layout(_offs(), x.shape[0], m)
    start, pstart = 0, 0
    for e, count in enumerate(COUNTS):
        padded = -(-count // m) * m
        if count:
            x_e = F.pad(x[start:start + count], (0, 0, 0, padded - count))
            opts = [dict(v[1], seed=seeds[e:e + 1, 2]) if v[1].get("stochastic") else v[1]
                    for v in views]
            r, c = quantize_views(x_e, (views[0][0], opts[0]), (views[1][0], opts[1]),
                                  "reference")
            assert torch.equal(_bits(q_row[0][start:start + count]), _bits(r.data[:count]))
            per = 2 if r.fmt.is_fp4 else 1
            assert torch.equal(_bits(q_col[0][:, pstart // per:(pstart + padded) // per]),
                               _bits(c.data))
            if r.fmt.value == "fp8_tensor":
                assert torch.equal(q_row[1][e], r.scale) and torch.equal(q_col[1][e], c.scale)
            else:
                assert torch.equal(_bits(q_row[1][start:start + count]), _bits(r.scale[:count]))
            if r.fmt.value == "nvfp4":
                assert torch.equal(q_row[2][e], r.amax) and torch.equal(q_col[2][e], c.amax)
        start, pstart = start + count, pstart + padded
    assert pstart == int(lay.pad_ends[-1]) <= lay.bound


def test_delayed_scaling_per_expert():
    """fp8_delayed: each expert keeps its own history; an expert without tokens is left alone."""
    torch.manual_seed(0)
    x, w, dy, _ = _inputs()
    layer = ms.GroupedLinear(len(COUNTS), K, N, "fp8_delayed")
    with torch.no_grad():
        layer.weight.copy_(w)
    singles = [ms.Linear(K, N, bias=False, recipe="fp8_delayed") for _ in COUNTS]
    for e, lin in enumerate(singles):
        with torch.no_grad():
            lin.weight.copy_(w[e])
    for _ in range(2):                       # step 2 uses the scales step 1 recorded
        xg = x.clone().requires_grad_()
        y = layer(xg, _offs())
        y.backward(dy)
        start = 0
        for e, count in enumerate(COUNTS):
            if count:
                x_e = x[start:start + count].clone().requires_grad_()
                y_e = singles[e](x_e)
                y_e.backward(dy[start:start + count])
                torch.testing.assert_close(y[start:start + count], y_e, atol=8e-3, rtol=8e-3)
                torch.testing.assert_close(layer.weight.grad[e], singles[e].weight.grad)
                singles[e].weight.grad = None
            start += count
        layer.weight.grad = None
    state = layer.delayed_state("weight")
    assert torch.equal(state["fprop.a/scale"][1], torch.tensor(1.0))          # empty: untouched
    assert torch.equal(state["fprop.a/scale"][0], singles[0].delayed_state()["fprop.a/scale"])


@needs_interp
@pytest.mark.parametrize("name", ["nvfp4", "nvfp4_no_rht", "mxfp4", "mxfp8", "fp8_blockwise",
                                  "fp8_tensorwise", "mxfp8@pair", "fp8_blockwise@pair",
                                  "fp8_blockwise@padded"])
def test_sync_free_quantization_bit_exact(name, monkeypatch):
    """The sync-free quantizer = the reference, bit for bit; SR via the same per-expert bytes
    (made by the fast path's hash pass; NVFP4 views draw in-kernel Philox there, so they are
    given the bytes: tests/test_grouped_nvfp4_reg.py checks their Philox stream).
    ``@pair``: FP8/MXFP8 pairs from one row + column call (CONFIG PAIR; FP8 1x128 reads the
    tokens through the padded layout's row map, CONFIG GATHER); ``@padded``: the FP8 pair on
    a padded copy, its row view gathered back."""
    name, _, pair = name.partition("@")
    monkeypatch.setitem(fast.CONFIG, "PAIR", bool(pair))
    monkeypatch.setitem(fast.CONFIG, "GATHER", pair == "pair")
    recipe = Recipe.from_name(name)
    x, _, _, seeds = _inputs(1)
    m, offs = recipe.required_multiples()["tokens"], _offs()
    lay = group_layout(offs, x.shape[0], m)
    rg, cg = lay.row_groups(), lay.col_groups()
    row_bits = segment_rand_bits(seeds[rg, 2][:, None],
                                 _local_index(rg, lay.starts, lay.counts, *x.shape, "rows"))
    col_bits = segment_rand_bits((seeds[cg, 2] + 1)[None, :], _local_index(
        cg, lay.pad_starts, lay.pad_counts, K, lay.bound, "cols"))
    for roles in (("fprop", "a", "wgrad", "b"), ("dgrad", "a", "wgrad", "a")):
        ops = [getattr(getattr(recipe, roles[0]), roles[1]),
               getattr(getattr(recipe, roles[2]), roles[3])]
        views = [(op.format, op.quantize_kwargs() | {"check_finite": False}) for op in ops]
        given = (row_bits, col_bits) if name.startswith("nvfp4") else (None, None)
        got = fast.quantize_grouped_fast(x, offs, *views, m, seeds[:, 2], *given, None, None,
                                         "triton")
        if pair:
            path = ms.explain()[("quantize_grouped", f"{views[0][0].value}|{views[1][0].value}")]
            assert "row + column kernel call" in path
            assert ("row map" in path) == (pair == "pair" and name == "fp8_blockwise")
        want = quantize_grouped_reference(x, offs, *views, m, seeds[:, 2], row_bits, col_bits,
                                          None, None)
        for g, r in zip(got, want):
            for a, b in zip(g, r):
                assert torch.equal(_bits(a), _bits(b)), (name, roles)


@needs_interp
@pytest.mark.parametrize("name, k", [("nvfp4_no_sr", 32), ("fp8_blockwise", 128),
                                     ("fp8_blockwise@pair", 128)])
def test_sync_free_layer_matches_reference(name, k, monkeypatch):
    name, _, pair = name.partition("@")
    monkeypatch.setitem(fast.CONFIG, "PAIR", bool(pair))
    counts = [5, 0, 21]
    x, w, dy, seeds = _inputs(2, counts, k, k)
    ref = _grouped_step(Recipe.from_name(name, backend="reference"), x, w, dy, seeds, None, counts)
    got = _grouped_step(Recipe.from_name(name, backend="triton"), x, w, dy, seeds, None, counts)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a.float(), b.float(), atol=8e-3, rtol=8e-3)
    paths = str(ms.explain())
    assert "sync-free" in paths and "Triton grouped" in paths      # the grouped GEMM kernel ran


@needs_interp
@pytest.mark.parametrize("counts,k", [([5, 0, 37, 130, 0], 256), ([128, 1], 128)])
def test_fp8_pair_through_the_row_map_equals_the_padded_copy(counts, k, monkeypatch):
    """The gathered FP8 pair (kernels/quant_fp8.pair_gathered) against the padded copy's pair
    with its row view gathered back: codes and scales bit for bit, with NaN, ±Inf, -0 and a
    subnormal among the tokens, empty experts, groups off and on the 128 block, K of 1 and 2
    column tiles; gap rows read as zeros (a NaN in the last token must not reach them)."""
    x = _inputs(4, counts, k, k)[0]
    x[0, 0], x[4, 1], x[-1, -1] = float("nan"), float("inf"), float("nan")
    x[1, 2], x[2, 3], x[3, 4] = -0.0, float("-inf"), 1e-40
    view = (QFormat.FP8_BLOCK, {"block": (1, 128), "pow2_scales": True, "check_finite": False})
    offs = _offs(counts)
    out = {}
    for gather in (True, False):
        monkeypatch.setitem(fast.CONFIG, "GATHER", gather)
        out[gather] = fast.quantize_grouped_fast(x, offs, view, view, 128, None, None, None,
                                                 None, None, "triton")
        assert ("row map" in ms.explain()[("quantize_grouped", "fp8_block|fp8_block")]) == gather
    for g, p in zip(out[True], out[False]):
        for a, b in zip(g, p):
            assert a.shape == b.shape and torch.equal(_bits(a), _bits(b))


def test_sync_free_path_never_reads_group_sizes(monkeypatch):
    """No .item() / .tolist() / bool() of a tensor inside the sync-free quantizer and GEMM."""
    recipe = Recipe.from_name("nvfp4")
    x, w, _, seeds = _inputs(3)
    views = [(op.format, op.quantize_kwargs() | {"check_finite": False})
             for op in (recipe.dgrad.a, recipe.wgrad.a)]
    q_w = [(recipe.dgrad.b.format, recipe.dgrad.b.quantize_kwargs())]
    from microscale.ops_experts import quantize_experts
    qw = quantize_experts(w.transpose(1, 2).contiguous(), *q_w, None, "reference")[0]
    m = recipe.required_multiples()["tokens"]

    def boom(*args, **kwargs):
        raise AssertionError("host sync in the sync-free path")
    for attr in ("item", "tolist", "__bool__", "__int__", "__float__"):
        monkeypatch.setattr(torch.Tensor, attr, boom)
    q_row, _ = fast.quantize_grouped_fast(x, _offs(), *views, m, seeds[:, 2], None, None,
                                              None, None, "reference")
    y = fast.grouped_mm_fast(q_row[0], q_row[1], "nvfp4,1,16,1", qw.data, qw.scale,
                             qw.spec, _offs(), "tokens", "reference")
    assert y.shape == (x.shape[0], K)


@pytest.mark.parametrize("bad, match", [
    (lambda x, w, o: (x, w, o.to(torch.int64)), "int32"),
    (lambda x, w, o: (x, w, o.flip(0)), "non-decreasing"),
    (lambda x, w, o: (x, w, o - 1), "last offset"),
    (lambda x, w, o: (x[:, :64], w, o), "reduction dims"),
    (lambda x, w, o: (x, w[0], o), r"w \[E, N, K\]"),
    (lambda x, w, o: (x, w[:2], o), "int32 \\[E\\]"),
])
def test_bad_arguments_raise(bad, match):
    x, w, _, _ = _inputs()
    with pytest.raises(ValueError, match=match):
        ms.grouped_mm(*bad(x, w, _offs()), "mxfp8")


def test_recipe_errors():
    x, w, _, _ = _inputs()
    tiles = Recipe.from_name("nvfp4").with_operand("fprop", "a", block=(16, 16))
    with pytest.raises(ValueError, match="2D tiles"):
        ms.grouped_mm(x, w, _offs(), tiles)
    with pytest.raises(ValueError, match="delayed scaling"):
        ms.grouped_mm(x, w, _offs(), "fp8_delayed")


def test_ops_fakes_and_fullgraph_trace():
    """opcheck on the custom ops; the layer traces as one graph (aot_eager: no Inductor)."""
    x, w, _, seeds = _inputs()
    recipe = Recipe.from_name("nvfp4")
    spec = [ms.ops.view_spec(op.format, op.quantize_kwargs() | {"check_finite": False})
            for op in (recipe.dgrad.a, recipe.wgrad.a)]
    bound = padded_bound(x.shape[0], len(COUNTS), 16)
    torch.library.opcheck(torch.ops.microscale.quantize_grouped.default,
                          (x, _offs(), *spec, 16, bound, "reference", seeds[:, 2], None, None,
                           None, None), test_utils=("test_schema", "test_faketensor"))
    with pytest.raises(ValueError, match="bound"):     # the bound is the layout's, or refused
        torch.ops.microscale.quantize_grouped(x, _offs(), *spec, 16, bound + 16, "reference",
                                              seeds[:, 2], None, None, None, None)
    layer = ms.GroupedLinear(len(COUNTS), K, N, "nvfp4")
    fn = torch.compile(lambda t, o: layer(t, o).float().square().sum(), backend="aot_eager",
                       fullgraph=True)
    xg = x.clone().requires_grad_()
    fn(xg, _offs()).backward()
    assert xg.grad.shape == x.shape and layer.weight.grad.shape == w.shape


@needs_interp
@pytest.mark.parametrize("name", ["nvfp4", "fp8_blockwise", "mxfp8"])
def test_grouped_gemm_out_kernel_matches_reference(name):
    """``grouped_scaled_mm_out`` (the experts' factors and the output dtype in the GEMM's
    epilogue) on the kernels = its reference: the fp32 sum times the expert's factor, one
    rounding; the op's fake passes opcheck."""
    from microscale.ops_grouped import grouped_factor, grouped_gemm_out, quantize_grouped
    from microscale.ops_experts import quantize_experts
    x, w, _, seeds = _inputs(counts=[40, 0, 70, 18])
    offs = _offs([40, 0, 70, 18])
    recipe = Recipe.from_name(name)
    a, b = recipe.fprop.a, recipe.fprop.b
    q_x, _ = quantize_grouped(x, offs, (a.format, a.quantize_kwargs() | {"check_finite": False}),
                              None, 16, "reference")
    q_w, = quantize_experts(w, (b.format, b.quantize_kwargs() | {"check_finite": False}), None,
                            "reference")[:1]
    factor = grouped_factor(q_x, q_w) * torch.tensor([1.0, 3.0, 0.25, 7.0])   # distinct
    got = grouped_gemm_out(q_x, q_w, offs, factor, torch.bfloat16, "triton")
    assert "epilogue" in ms.explain()[("grouped_scaled_mm_out", f"{a.format.value}x"
                                                                f"{b.format.value}")]
    want = grouped_gemm_out(q_x, q_w, offs, factor, torch.bfloat16, "reference")
    assert got.dtype == want.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), want.float(), rtol=2 ** -7, atol=1e-3)
    # (opcheck's schema-check mode has no multiply of fp8 scales on CPU: the fake only)
    torch.library.opcheck(torch.ops.microscale.grouped_scaled_mm_out.default,
                          (q_x.data, q_x.scale, q_x.spec, q_w.data, q_w.scale, q_w.spec, offs,
                           factor.float(), torch.bfloat16, "reference"),
                          test_utils=("test_faketensor",))


@needs_interp
@pytest.mark.parametrize("dtype,counts", [(torch.float32, COUNTS), (torch.float16, COUNTS),
                                          (torch.bfloat16, [130, 0, 3, 70])])
def test_nvfp4_grouped_kernel_matches_pytorch_twin(dtype, counts):
    """quant_nvfp4_grouped (Triton) = quant.grouped.quantize_segments (PyTorch), both views,
    RHT and SR, for every input dtype; NaN marks its block as the reference does. [130, 0, 3,
    70] gives row tiles inside one expert (one atomic a tile) and tiles across three."""
    from microscale.kernels.quant_nvfp4_grouped import quantize_nvfp4_segments_triton
    from microscale.quant.grouped import quantize_segments, segment_sr_bytes
    from microscale.tensor import QFormat

    x, _, _, seeds = _inputs(4, counts=counts, k=64)
    x = x.to(dtype)
    x[3, 7] = float("nan")
    if x.shape[0] > 150:
        x[150, 5] = 9.0                               # expert 3's max, mid-tile
    lay = group_layout(_offs(counts), x.shape[0], 16)
    x_pad = lay.pad(x)
    for col, src, seg, starts, lengths in (
            (False, x, lay.row_groups(), lay.starts, lay.counts),
            (True, x_pad, lay.col_groups(), lay.pad_starts, lay.pad_counts)):
        view = src.t().contiguous() if col else src
        along = "cols" if col else "rows"
        bits = segment_sr_bytes(seg, starts, lengths, tuple(view.shape), along, seeds[:, 0])
        want = quantize_segments(view, QFormat.NVFP4, {"rht": col, "stochastic": True,
                                                       "rand_bits": bits}, seg, starts, lengths,
                                 along, None, None, None)
        got = quantize_nvfp4_segments_triton(src, seg, len(counts), col, col, bits)
        for a, b in zip(got, want):
            assert torch.equal(_bits(a), _bits(b)), (dtype, col)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_other_dtypes_and_no_tokens_at_all(dtype):
    """fp32/fp16 tokens give outputs of their dtype; T = 0 gives an empty y and zero dW."""
    x, w, dy, seeds = _inputs(5, counts=[3, 0, 20], k=64, n=32)
    y, _, dw = _grouped_step("nvfp4", x.to(dtype), w, dy.to(dtype), seeds, counts=[3, 0, 20])
    assert y.dtype == dtype and torch.isfinite(dw).all()
    wg = w.clone().requires_grad_()
    y0 = ms.grouped_mm(x[:0].to(dtype), wg, torch.zeros(3, dtype=torch.int32), "nvfp4")
    y0.sum().backward()
    assert y0.shape == (0, 32) and torch.equal(wg.grad, torch.zeros_like(w))


@needs_interp
def test_sr_bytes_kernel_matches_pytorch_twin():
    from microscale.kernels.sr_bytes_grouped import segment_sr_bytes_triton
    from microscale.quant.grouped import segment_sr_bytes

    lay = group_layout(_offs(), sum(COUNTS), 32)
    seeds = torch.randint(0, 2**31 - 1, (len(COUNTS),), generator=torch.Generator().manual_seed(7))
    for args in ((lay.row_groups(), lay.starts, lay.counts, (sum(COUNTS), 96), "rows"),
                 (lay.col_groups(), lay.pad_starts, lay.pad_counts, (96, lay.bound), "cols")):
        want = segment_sr_bytes(*args, seeds)
        assert torch.equal(segment_sr_bytes_triton(*args, seeds), want)
        assert 120 < want.float().mean() < 136                 # roughly uniform bytes


def test_reduce_groups_must_end_on_the_alignment_the_fast_gemm_assumes():
    """"reduce" offsets are the padded column layout's ends (multiples of 16): the sync-free
    GEMM loads K in vectors on that promise, so the reference, which reads them, checks it."""
    from microscale.ops_grouped import REDUCE_ALIGN, grouped_mm_reference
    a = torch.ones(4, 64).to(torch.float8_e4m3fn)
    one = torch.ones((), dtype=torch.float32)
    spec = "fp8_tensor,0,0,1"
    good = torch.tensor([16, 48], dtype=torch.int32)
    y = grouped_mm_reference(a, one, spec, a, one, spec, good, "reduce")
    assert torch.equal(y, torch.stack([torch.full((4, 4), 16.0), torch.full((4, 4), 32.0)]))
    with pytest.raises(ValueError, match=f"multiples of {REDUCE_ALIGN}"):
        grouped_mm_reference(a, one, spec, a, one, spec, good - 8, "reduce")


@pytest.mark.parametrize("backend", ["reference", pytest.param("triton", marks=needs_interp)])
@pytest.mark.parametrize("name,n", [("fp8_blockwise", 256), ("mxfp8", 96), ("mxfp8", 128),
                                    ("mxfp8@expand", 128), ("mxfp4", 64), ("nvfp4", 64)])
def test_expert_weights_stacked_equal_each_expert_alone(name, n, backend, monkeypatch):
    """Block-local weight formats are quantized for all experts in one call per view; each
    expert's codes, scales and amax equal its own call's (the per-expert loop, forced here).
    nvfp4 (a global amax per expert, 16x16 tiles) stacks through the per-segment kernel, so
    only where kernels run (here the interpreter); the reference keeps the loop. FP8 128x128
    and MXFP8 (E·N a multiple of 128) take both views from one pair-kernel call where kernels
    run; ``@expand``: W's view written expanded (bf16 value · scale)."""
    from microscale import ops_experts
    name, _, expand = name.partition("@")
    recipe = Recipe.from_name(name)
    g = torch.Generator().manual_seed(3)
    w = (torch.randn(3, n, 128, generator=g) * 0.05).to(torch.bfloat16)
    views = [(op.format, op.quantize_kwargs() | {"check_finite": False})
             for op in (recipe.fprop.b, recipe.dgrad.b)]
    if expand:
        views[0] = (views[0][0], {**views[0][1], "expand": True})
    stacked = ops_experts._stackable(w, *views, (None, None), backend)
    assert stacked == (name != "nvfp4" or backend == "triton")   # NVFP4: the segment kernel
    if name == "nvfp4":            # finiteness checks or an expanded column view: the loop
        assert not ops_experts._stackable(w, (views[0][0], {**views[0][1], "check_finite": True}),
                                          views[1], (None, None), backend)
        assert not ops_experts._stackable(w, views[0], (views[1][0], {**views[1][1],
                                                                      "expand": True}),
                                          (None, None), backend)
        assert ops_experts._stackable(w, (views[0][0], {**views[0][1], "expand": True}),
                                      views[1], (None, None), backend) == stacked
    monkeypatch.setattr(ops_experts, "triton_available", lambda: False)     # no Triton: loop
    assert ops_experts._stackable(w, *views, (None, None), backend) == (name != "nvfp4")
    monkeypatch.undo()
    calls, real = [], ops_experts.quantize_views
    monkeypatch.setattr(ops_experts, "quantize_views", lambda *a: calls.append(1) or real(*a))
    got = ops_experts.quantize_experts(w, *views, backend)
    monkeypatch.undo()
    if name == "fp8_blockwise":     # 128x128 both ways: the column view is the row's transpose,
        # from the row view's bytes (reference) or written by the pair kernel (one read of w)
        assert len(calls) == (backend == "reference")
        if backend == "triton":
            assert "pair kernel" in ms.explain()[("quantize_experts", "fp8_block")]
    if stacked and name == "nvfp4":             # the path is visible
        assert "per-segment" in ms.explain()[("quantize_experts", "nvfp4")]
    if name == "mxfp8":
        pair = backend == "triton" and n == 128
        assert len(calls) == (0 if pair else 2)
        if pair:
            assert "pair kernel" in ms.explain()[("quantize_experts", "mxfp8_e4m3")]
    monkeypatch.setattr(ops_experts, "_stackable", lambda *a: False)
    want = ops_experts.quantize_experts(w, *views, backend)
    for g_q, w_q in zip(got, want):
        assert g_q.spec == w_q.spec and g_q.data.shape == w_q.data.shape
        assert torch.equal(_bits(g_q.data), _bits(w_q.data))
        assert torch.equal(_bits(g_q.scale), _bits(w_q.scale))
        assert torch.equal(g_q.amax, w_q.amax.float())


@needs_interp
@pytest.mark.parametrize("counts,k,m", [(COUNTS, 96, 16), ([130, 0, 1], 512, 128), ([0, 0], 32, 32)])
def test_padding_kernel_equals_its_twin(counts, k, m):
    """The one-pass padded layout (kernels/pad_grouped.py) against GroupLayout.pad: empty
    experts, a tail past the last group, K off the kernel's column tile, no tokens at all,
    NaN and Inf copied as they are, gap rows exact zeros."""
    from microscale.kernels.pad_grouped import pad_rows, source_rows
    offs = torch.tensor(counts).cumsum(0).to(torch.int32)
    x = torch.randn(sum(counts), k).to(torch.bfloat16)
    if x.numel():
        x[0, 0], x[-1, -1] = float("nan"), float("-inf")
    lay = group_layout(offs, x.shape[0], m)
    got, want = pad_rows(x, lay), lay.pad(x)
    assert got.shape == want.shape == (lay.bound, k)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))
    src = source_rows(lay)
    assert int((src >= 0).sum()) == x.shape[0] and bool((got[src < 0] == 0).all())


@needs_interp
@pytest.mark.parametrize("name", ["nvfp4", "fp8_blockwise"])
def test_stacked_expert_weights_trace_as_one_graph(name):
    """The stacked expert-weight path runs inside compiled code: only custom ops (with fakes)
    and traceable torch ops, so a full-graph trace with the kernels (backend 'triton', the
    interpreter here) gives the eager bits."""
    from microscale import ops_experts
    recipe = Recipe.from_name(name)
    w = (torch.randn(3, 128, 128, generator=torch.Generator().manual_seed(5)) * 0.05
         ).to(torch.bfloat16)
    views = [(op.format, op.quantize_kwargs() | {"check_finite": False})
             for op in (recipe.fprop.b, recipe.dgrad.b)]
    assert ops_experts._stackable(w, *views, (None, None), "triton")
    if name == "nvfp4":
        torch.library.opcheck(torch.ops.microscale.quantize_nvfp4_experts.default,
                              (w.reshape(384, 128), 128, 3, True),
                              test_utils=("test_schema", "test_faketensor"))
    else:
        torch.library.opcheck(torch.ops.microscale.quantize_fp8_experts_pair.default,
                              (w.reshape(384, 128), 3, False),
                              test_utils=("test_schema", "test_faketensor"))

    def run(t):
        return [(q.data, q.scale, q.amax) for q in
                ops_experts.quantize_experts(t, *views, "triton")]
    got = torch.compile(run, backend="aot_eager", fullgraph=True)(w)
    for g_q, e_q in zip(got, run(w)):
        for a, b in zip(g_q, e_q):
            assert torch.equal(_bits(a), _bits(b))
