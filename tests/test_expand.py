"""Expanded operands: quantizers that write bf16 ``value · block_scale`` instead of codes.

On GPUs without FP4/MX tensor cores the GEMM decodes both operands to that form; the layer has
the FP4 and MXFP8 operands it consumes at once (x for fprop, dy for dgrad and wgrad) quantized straight
into it (the NVFP4 passes, the MXFP4 kernel and the MXFP8 register pair kernel write it; the
other MXFP8 kernels write codes, which the op decodes). Everything
here is bit for bit: the expanded data equal the codes decoded
(``QuantizedTensor.expand``), kernel against reference, and a layer with expansion equals a
layer without it (outputs and gradients).
"""

from __future__ import annotations

import os

import pytest
import torch

import microscale as ms
from microscale.nn import function
from microscale.ops import mm, quantize_views
from microscale.tensor import QFormat

NF = {"check_finite": False}
N, E4, E5 = QFormat.NVFP4, QFormat.MXFP8_E4M3, QFormat.MXFP8_E5M2


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-equal, except that any two NaNs count as equal (their payloads may differ)."""
    a, b = a.float(), b.float()
    return torch.equal(torch.isnan(a), torch.isnan(b)) and \
        torch.equal(a.nan_to_num(7.0).view(torch.int32), b.nan_to_num(7.0).view(torch.int32))


def _x(shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g) * torch.logspace(-3, 3, shape[1])
    x = x.to(torch.bfloat16)
    x[3, 5], x[7, 9], x[1, 2] = float("nan"), float("inf"), -3e38
    return x


def _check_pair(x, row, col, expand, backend, path=""):
    """Views with ``expand`` against the same views as codes, decoded; ``path``: what
    ``ms.explain()`` must say of the expanded call."""
    got = quantize_views(x, (row[0], {**row[1], "expand": expand[0]}),
                         (col[0], {**col[1], "expand": expand[1]}), backend)
    assert path in ms.explain()[("quantize_rowcol", f"{row[0].value}|{col[0].value}")]
    want = quantize_views(x, row, col, backend)
    for q, q0, e in zip(got, want, expand):
        assert q.expanded == e
        q0 = q0.expand() if e else q0
        assert q.data.dtype == q0.data.dtype and q.data.shape == q0.data.shape
        assert _same(q.data, q0.data)
        assert torch.equal(q.scale.view(torch.uint8), q0.scale.view(torch.uint8))
        assert _same(q.amax, q0.amax)
    return got


# each expand pattern with and without REG['COL_EXP'], each on one of the two shapes (not the
# full cross-product: CI time)
@pytest.mark.parametrize("shape,expand,reg_col_exp", [
    ((256, 128), (True, True), False), ((48, 80), (True, False), False),
    ((256, 128), (False, True), False), ((48, 80), (True, True), True),
    ((256, 128), (True, False), True), ((48, 80), (False, True), True)])
def test_nvfp4_pairs_expanded(shape, expand, reg_col_exp, monkeypatch):
    """x pair (reg pass: its row view expanded in the kernel, and its column view with
    ``REG['COL_EXP']``) and dy pair (split into two reg-pass launches, the default; the rows
    pass is held to the same bits below), in-kernel Philox and caller bits; a partial tile
    (48 x 80) included."""
    from microscale.kernels import quant_nvfp4
    monkeypatch.setitem(quant_nvfp4.CONFIG, "REG", {**quant_nvfp4.CONFIG["REG"],
                                                     "COL_EXP": reg_col_exp})
    x = _x(shape, seed=1)
    seed = torch.tensor([99])
    _check_pair(x, (N, NF), (N, {**NF, "rht": True}), expand, "triton")
    sr = {**NF, "stochastic": True}
    _check_pair(x, (N, {**sr, "seed": seed}), (N, {**sr, "rht": True, "seed": seed}), expand,
                "triton")
    g = torch.Generator().manual_seed(3)
    bits = [torch.randint(0, 256, s, dtype=torch.uint8, generator=g) for s in (shape, shape[::-1])]
    row = (N, {**sr, "rand_bits": bits[0]})
    col = (N, {**sr, "rht": True, "rand_bits": bits[1]})
    got = _check_pair(x, row, col, expand, "triton")
    ref = quantize_views(x, row, col, "reference")        # caller bits: the reference's codes
    for q, r, e in zip(got, ref, expand):
        assert _same(q.data, (r.expand() if e else r).data)


@pytest.mark.parametrize("device,shape", [("cpu", (48, 80)),
                                          pytest.param("cuda", (4096, 768), marks=pytest.mark.gpu)])
def test_nvfp4_expanded_rows_nan_max_same_bits(device, shape, monkeypatch):
    """``quant_nvfp4.CONFIG["EXP_NAN_MAX"]``: an expanded row view (alone, RNE and SR) takes its
    blocks' maxima with NaN kept, no per-element select; the same values and scale bytes as
    with the select and as the reference, NaN, Inf and a huge value in x."""
    from microscale.kernels import quant_nvfp4
    x = _x(shape, seed=6)
    x[5, 40:44] = torch.tensor([float("nan"), -float("nan"), float("inf"), 0.0])
    g = torch.Generator().manual_seed(2)
    bits = torch.randint(0, 256, shape, dtype=torch.uint8, generator=g)
    for opts in ({**NF, "expand": True}, {**NF, "expand": True, "stochastic": True,
                                          "rand_bits": bits}):
        outs = []
        monkeypatch.setitem(quant_nvfp4.CONFIG, "ROW1", {**quant_nvfp4.CONFIG["ROW1"],
                                                         "expanded": False})   # the reg pass's
        for on in (True, False):
            monkeypatch.setitem(quant_nvfp4.CONFIG, "EXP_NAN_MAX", on)
            dev = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in opts.items()}
            outs.append(quantize_views(x.to(device), (N, dev), None, "triton")[0])
        assert "reg pass" in ms.explain()[("quantize_rowcol", "nvfp4|none")]
        ref = quantize_views(x, (N, opts), None, "reference")[0]   # caller bits: the same
        for q in outs:
            assert _same(q.data.cpu(), ref.data) and _same(q.amax.cpu(), ref.amax)
            assert torch.equal(q.scale.cpu().view(torch.uint8), ref.scale.view(torch.uint8))


@pytest.mark.parametrize("device,shape", [("cpu", (256, 128)), ("cpu", (48, 80)),
                                          pytest.param("cuda", (4096, 768), marks=pytest.mark.gpu)])
def test_nvfp4_x_pair_split_equals_one_launch(device, shape, monkeypatch):
    """The x pair (row view expanded, RHT'd column view) as two reg-pass launches (inputs at
    most ``CONFIG['SPLIT_X_MAX_COLS']`` wide) gives the one launch's bits, which equal the
    reference's."""
    from microscale.kernels import quant_nvfp4
    x = _x(shape, seed=4)
    row, col = (N, {**NF, "expand": True}), (N, {**NF, "rht": True})
    monkeypatch.setitem(quant_nvfp4.CONFIG, "SPLIT_X_MAX_COLS", shape[1] - 1)
    one = quantize_views(x.to(device), row, col, "triton")
    assert "reg pass" in ms.explain()[("quantize_rowcol", "nvfp4|nvfp4")]
    monkeypatch.setitem(quant_nvfp4.CONFIG, "SPLIT_X_MAX_COLS", shape[1])
    two = quantize_views(x.to(device), row, col, "triton")
    assert "pair split" in ms.explain()[("quantize_rowcol", "nvfp4|nvfp4")]
    ref = quantize_views(x, row, col, "reference")
    for a, b, r in zip(one, two, ref):
        for q in (a, b):
            assert _same(q.data.cpu(), r.data) and _same(q.amax.cpu(), r.amax)
            assert torch.equal(q.scale.cpu().view(torch.uint8), r.scale.view(torch.uint8))


@pytest.mark.gpu
def test_gpu_nvfp4_x_pair_one_launch():
    """The x pair in one reg-pass launch (inputs wider than ``SPLIT_X_MAX_COLS``) against the
    reference on the GPU. (Session 25 call 7 ran this on the [256, 32] tiles and with 8 warps
    too, bench_train's "@nv-reg-bc32" / "@nv-reg-w8": the same bits, and no faster.)"""
    x = _x((4096, 2048), seed=7)
    row, col = (N, {**NF, "expand": True}), (N, {**NF, "rht": True})
    got = quantize_views(x.cuda(), row, col, "triton")
    assert "reg pass" in ms.explain()[("quantize_rowcol", "nvfp4|nvfp4")]
    for q, r in zip(got, quantize_views(x, row, col, "reference")):
        assert _same(q.data.cpu(), r.data) and _same(q.amax.cpu(), r.amax)
        assert torch.equal(q.scale.cpu().view(torch.uint8), r.scale.view(torch.uint8))


@pytest.mark.parametrize("expand", [(True, True), (False, True)])
def test_nvfp4_expanded_column_to_rows_pass(expand, monkeypatch):
    """``EXP_COL_ROWS_MAX_COLS`` (``SPLIT_EXP_COL`` off): a pair whose column view is asked
    expanded runs the rows pass up to that input width, the reg pass (+ decode) above it
    (ms.explain says which); with ``SPLIT_EXP_COL`` it splits into two reg-pass launches at
    every width. The same bits every way; an x pair (column view as codes) stays on the reg
    pass."""
    from microscale.kernels import quant_nvfp4
    x = _x((256, 128), seed=5)
    pair = ((N, NF), (N, {**NF, "rht": True}))
    monkeypatch.setitem(quant_nvfp4.CONFIG, "SPLIT_X_MAX_COLS", 0)   # the x pair in one launch
    monkeypatch.setitem(quant_nvfp4.CONFIG, "SPLIT_EXP_COL", False)
    monkeypatch.setitem(quant_nvfp4.CONFIG, "EXP_COL_ROWS_MAX_COLS", 128)
    rows = _check_pair(x, *pair, expand, "triton", path="rows pass")
    _check_pair(x, *pair, (True, False), "triton", path="reg pass")
    monkeypatch.setitem(quant_nvfp4.CONFIG, "EXP_COL_ROWS_MAX_COLS", 127)
    _check_pair(x, *pair, expand, "triton", path="reg pass")
    # SPLIT_EXP_COL (the default): such a pair splits at any width, same bits
    monkeypatch.setitem(quant_nvfp4.CONFIG, "SPLIT_EXP_COL", True)
    for bound in (127, 128):
        monkeypatch.setitem(quant_nvfp4.CONFIG, "EXP_COL_ROWS_MAX_COLS", bound)
        split = _check_pair(x, *pair, expand, "triton", path="pair split")
        for q, w in zip(split, rows):
            assert q.expanded == w.expanded and _same(q.data, w.data)
            assert torch.equal(q.scale.view(torch.uint8), w.scale.view(torch.uint8))
    _check_pair(x, *pair, (True, False), "triton", path="reg pass")    # x: column codes


@pytest.mark.parametrize("shape,expand", [((256, 128), (True, True)), ((48, 80), (False, False)),
                                          ((48, 80), (False, True))])
def test_nvfp4_dy_pair_split_equals_rows_pass(shape, expand, monkeypatch):
    """``quant_nvfp4.CONFIG['SPLIT']``: a dy pair (row SR, column RHT + SR) as two reg-pass
    launches gives the rows pass's bits (Philox streams included), codes and expanded, and
    with caller bits the reference's; a partial tile (48 x 80) included."""
    from microscale.kernels import quant_nvfp4
    monkeypatch.setitem(quant_nvfp4.CONFIG, "SPLIT_MIN_COLS", 0)   # split at any width
    x = _x(shape, seed=3)
    g = torch.Generator().manual_seed(4)
    bits = [torch.randint(0, 256, s, dtype=torch.uint8, generator=g) for s in (shape, shape[::-1])]
    sr = {**NF, "stochastic": True}
    for row, col in [((N, {**sr, "seed": torch.tensor([3])}),
                      (N, {**sr, "rht": True, "seed": torch.tensor([3])})),
                     ((N, {**sr, "rand_bits": bits[0]}),
                      (N, {**sr, "rht": True, "rand_bits": bits[1]}))]:
        monkeypatch.setitem(quant_nvfp4.CONFIG, "SPLIT", True)
        got = _check_pair(x, row, col, expand, "triton", "pair split")
        monkeypatch.setitem(quant_nvfp4.CONFIG, "SPLIT", False)
        want = _check_pair(x, row, col, expand, "triton", "rows pass")
        for q, w in zip(got, want):
            assert q.expanded == w.expanded and _same(q.data, w.data)
            assert torch.equal(q.scale.view(torch.uint8), w.scale.view(torch.uint8))
        if "rand_bits" in row[1]:
            ref = quantize_views(x, row, col, "reference")
            for q, r, e in zip(got, ref, expand):
                assert _same(q.data, (r.expand() if e else r).data)
    # SPLIT_MIN_COLS: only inputs at least that wide split; narrower ones keep the rows pass
    monkeypatch.setitem(quant_nvfp4.CONFIG, "SPLIT", True)
    monkeypatch.setitem(quant_nvfp4.CONFIG, "SPLIT_MIN_COLS", shape[1] + 1)
    _check_pair(x, row, col, expand, "triton", "rows pass")
    monkeypatch.setitem(quant_nvfp4.CONFIG, "SPLIT_MIN_COLS", shape[1])
    _check_pair(x, row, col, expand, "triton", "pair split")


# each expand pattern on one of the two shapes (not the full cross-product: CI time)
@pytest.mark.parametrize("shape,expand", [((256, 128), (True, True)), ((96, 160), (True, False)),
                                          ((96, 160), (False, True))])
def test_mxfp4_pairs_expanded(shape, expand, monkeypatch):
    """The MXFP4 kernel writes expanded views itself (no dequantize pass after it): x pair (row
    RNE, column RHT 32) and dy pair (row SR, column RHT 32 + SR), in-kernel Philox and caller
    bits, against the same views as codes decoded, and caller bits against the reference;
    NaN, Inf, a huge value (4 · 2^126 overflows: ±Inf as the decode gives) and a partial tile
    (96 x 160) included."""
    from microscale import ops
    decoded = []
    real = ops.dispatch
    monkeypatch.setattr(ops, "dispatch", lambda op, *a, **k: (
        decoded.append(op) if op == "expand" else None) or real(op, *a, **k))
    M4 = QFormat.MXFP4
    x = _x(shape, seed=2)
    x[5, 6] = -3.3e38                          # vmax near bf16's max: scale byte 253
    _check_pair(x, (M4, NF), (M4, {**NF, "rht": True}), expand, "triton")
    sr = {**NF, "stochastic": True}
    seed = torch.tensor([7])
    _check_pair(x, (M4, {**sr, "seed": seed}), (M4, {**sr, "rht": True, "seed": seed}), expand,
                "triton")
    g = torch.Generator().manual_seed(8)
    bits = [torch.randint(0, 256, s, dtype=torch.uint8, generator=g) for s in (shape, shape[::-1])]
    row, col = (M4, {**sr, "rand_bits": bits[0]}), (M4, {**sr, "rht": True, "rand_bits": bits[1]})
    got = _check_pair(x, row, col, expand, "triton")
    ref = quantize_views(x, row, col, "reference")
    for q, r, e in zip(got, ref, expand):
        assert _same(q.data, (r.expand() if e else r).data)
    assert "expand" not in decoded                # the kernel wrote them, no decode pass ran
    if expand[0]:                                 # the overflow happened (no RHT on rows)
        assert torch.isinf(got[0].data.float()).any()


@pytest.mark.parametrize("shape", [(256, 128), (128, 384)])
@pytest.mark.parametrize("fmts", [(E4, E4), (E5, E4)])
@pytest.mark.parametrize("expand", [(True, True), (True, False), (False, True)])
def test_mxfp8_pairs_expanded(shape, fmts, expand, monkeypatch):
    """The MXFP8 register pair kernel writes expanded views itself (bf16 RNE of ``value ·
    2^k``): against the same views as codes decoded, bf16 and fp32 input; NaN, Inf, a value
    near bf16's max, and (fp32) a block at the smallest scale whose subnormal elements times
    2^-127 are finer than bf16, where the rounding shows."""
    from microscale import ops
    decoded = []
    real = ops.dispatch
    monkeypatch.setattr(ops, "dispatch", lambda op, *a, **k: (
        decoded.append(op) if op == "expand" else None) or real(op, *a, **k))
    x = _x(shape, seed=9)
    x[5, 6] = -3.3e38
    for xin in (x, x.float()):
        if xin.dtype == torch.float32:
            tiny = torch.tensor([2.0 ** -119, 3 * 2.0 ** -136, 5 * 2.0 ** -137, 2.0 ** -135])
            xin[9, 32:64] = tiny.repeat(8)             # one 1x32 row block, k = -127
            xin[32:64, 7] = tiny.repeat(8)             # one 32x1 column block
        got = _check_pair(xin, (fmts[0], NF), (fmts[1], NF), expand, "triton",
                          "tile in registers")
        if xin.dtype == torch.float32 and expand[0]:  # the RNE case is really there
            exact = quantize_views(xin, (fmts[0], NF), None, "reference")[0].block_values()
            assert not torch.equal(got[0].data.float()[9, 32:64], exact[9, 32:64])
    assert "expand" not in decoded                    # the kernel wrote them, no decode pass


@pytest.mark.parametrize("counts", [[128, 0, 120], [5, 0, 37, 16]])
def test_grouped_mxfp8_row_view_expanded(counts, monkeypatch):
    """MoE: nn.grouped asks for an MXFP8 row view expanded; the pair call on the padded tokens
    (whole 128-row tiles: ``padded_bound``) runs the register pair kernel, which writes it
    expanded; with that kernel off (``ROWCOL`` "mx") the op decodes it after. Equal to the
    reference's expanded view either way, bit for bit, the column view's codes too."""
    from microscale.kernels import grouped as fast
    from microscale.kernels import quant_mx
    from microscale.ops_grouped import quantize_grouped_reference
    g = torch.Generator().manual_seed(11)
    x = (torch.randn(sum(counts), 128, generator=g) * 3).to(torch.bfloat16)
    x[3, 5] = float("nan")
    offs = torch.tensor(counts).cumsum(0).to(torch.int32)
    views = [(E4, {"check_finite": False, "expand": True}), (E4, {"check_finite": False})]
    want = quantize_grouped_reference(x, offs, *views, 32, None, None, None, None, None)
    for mode, note in (("reg", "written expanded"), ("mx", "MX kernel")):
        monkeypatch.setitem(quant_mx.CONFIG, "ROWCOL", mode)
        got = fast.quantize_grouped_fast(x, offs, *views, 32, None, None, None, None, None,
                                         "triton")
        assert "one row + column kernel call" in \
            ms.explain()[("quantize_grouped", "mxfp8_e4m3|mxfp8_e4m3")]
        assert note in ms.explain()[("quantize_rowcol", "mxfp8_e4m3|mxfp8_e4m3")]
        assert got[0][0].dtype == torch.bfloat16 and got[1][0].dtype == torch.float8_e4m3fn
        for gv, wv in zip(got, want):
            for a, b in zip(gv, wv):
                a8, b8 = [t.view(torch.uint8) if t.dtype.itemsize == 1 else t for t in (a, b)]
                assert a.shape == b.shape and _same(a8, b8), mode


@pytest.mark.parametrize("fmts", [(QFormat.MXFP4, QFormat.MXFP4), (E4, E4), (E5, E4)])
def test_reference_and_fallback_expand(fmts, monkeypatch):
    """The reference backend, and kernel passes that write codes (the op then decodes them:
    MXFP8's and MXFP4's with ``quant_mx.CONFIG['EXPAND']`` off); NaN, Inf and a huge
    value (scale byte >= 241) included."""
    from microscale.kernels import quant_mx
    monkeypatch.setitem(quant_mx.CONFIG, "EXPAND", False)
    x = _x((256, 384))
    _check_pair(x, (fmts[0], NF), (fmts[1], NF), (True, True), "reference")
    _check_pair(x, (fmts[0], NF), (fmts[1], NF), (True, False), "triton")
    assert ms.explain()[("expand", fmts[0].value)].startswith("triton dequantize pass")


def test_expand_refused_for_fp8():
    q = ms.quantize(torch.randn(4, 128), "fp8_block")
    with pytest.raises(ValueError, match="expand"):
        q.expand()


@pytest.mark.parametrize("backend", ["reference", "triton"])
@pytest.mark.parametrize("fmt", [N, E4])
def test_gemm_of_expanded_operands_is_the_same(fmt, backend):
    """``scaled_mm`` of expanded operands (one or both) equals it of codes, bit for bit."""
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(128, 256, generator=g), torch.randn(64, 256, generator=g)
    qa, qb = [quantize_views(t, (fmt, NF), None, "reference")[0] for t in (a, b)]
    want = mm(qa, qb, torch.float32, backend)
    for ea, eb in ((True, False), (False, True), (True, True)):
        got = mm(qa.expand() if ea else qa, qb.expand() if eb else qb, torch.float32, backend)
        assert torch.equal(got, want)


def _train_step(recipe: str, expand: bool, monkeypatch):
    if not expand:
        monkeypatch.setattr(function, "_expand_a", lambda *a, **k: False)
    torch.manual_seed(0)
    layer = ms.Linear(128, 96, recipe=ms.Recipe.from_name(recipe).without_sr())
    x = torch.randn(40, 128, requires_grad=True)
    y = layer(x)
    y.backward(torch.randn_like(y))
    monkeypatch.undo()
    return y.detach(), x.grad, layer.weight.grad


@pytest.mark.parametrize("recipe", ["nvfp4", "mxfp4", "mxfp8"])
def test_layer_with_expansion_equals_layer_without(recipe, monkeypatch):
    """The layer asks for expanded x / dy views on CPU (the reference GEMM decodes anyway);
    outputs and both gradients are bit-identical to the codes path."""
    calls = []
    real = function._expand_a
    monkeypatch.setattr(function, "_expand_a",
                        lambda *a: (calls.append(a[1]) if real(*a) else None) or real(*a))
    with_exp = _train_step(recipe, True, monkeypatch)
    assert sorted(set(calls)) == ["dgrad", "fprop", "wgrad"]
    without = _train_step(recipe, False, monkeypatch)
    for a, b in zip(with_exp, without):
        assert torch.equal(a, b)


@pytest.mark.parametrize("recipe", ["nvfp4", "mxfp8"])
def test_layer_with_kept_xt_expanded_equals_layer_without(recipe, monkeypatch):
    """``CONFIG["EXPAND_XT"]``: wgrad's xᵀ is kept expanded (a bf16 ``[in, tokens]`` saved
    instead of codes), and the step's outputs and gradients keep their bits."""
    def saved_bf16_xt(on: bool):
        monkeypatch.setitem(function.CONFIG, "EXPAND_XT", on)
        kept = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: kept.append(t) or t, lambda t: t):
            out = _train_step(recipe, True, monkeypatch)
        # xᵀ: [in, tokens padded to the recipe's multiple] (NVFP4's Wᵀ is [128, 96])
        return out, any(t.dtype == torch.bfloat16 and tuple(t.shape) in ((128, 48), (128, 64))
                        for t in kept)
    (on, kept_on), (off, kept_off) = saved_bf16_xt(True), saved_bf16_xt(False)
    assert kept_on and not kept_off
    for a, b in zip(on, off):
        assert torch.equal(a, b)


def test_kept_xt_expansion_modes(monkeypatch):
    """``CONFIG["EXPAND_XT"]``: "auto" (the default) keeps an MXFP8 xᵀ expanded at inputs up to
    ``EXPAND_XT_MAX_IN`` wide and an NVFP4 one at every width, MXFP4 ones as codes; True /
    False everywhere; anything else is refused by name."""
    from microscale.nn.plan import keeps_xt_expanded
    mx8, nv = ms.QFormat.MXFP8_E4M3, ms.QFormat.NVFP4
    if "MICROSCALE_EXPAND_XT" not in os.environ:
        assert function.CONFIG["EXPAND_XT"] == "auto"
    monkeypatch.setitem(function.CONFIG, "EXPAND_XT", "auto")
    assert keeps_xt_expanded(mx8, 1024) and not keeps_xt_expanded(mx8, 1025)
    assert keeps_xt_expanded(nv, 64) and keeps_xt_expanded(nv, 8192)
    assert not keeps_xt_expanded(ms.QFormat.MXFP4, 64)
    for mode in (True, False):
        monkeypatch.setitem(function.CONFIG, "EXPAND_XT", mode)
        assert keeps_xt_expanded(mx8, 8192) is mode and keeps_xt_expanded(nv, 64) is mode
    monkeypatch.setitem(function.CONFIG, "EXPAND_XT", "on")
    with pytest.raises(ValueError, match="EXPAND_XT"):
        keeps_xt_expanded(mx8, 64)


def test_expand_decision(monkeypatch):
    """Off CUDA the A operands of FP4 and MXFP8 GEMMs are expanded (MXFP8: with
    ``CONFIG["EXPAND_MXFP8"]``, on by default); FP8 never."""
    cpu = torch.device("cpu")
    for name in ("nvfp4", "mxfp4", "mxfp8"):
        plan = function.Plan(ms.Recipe.from_name(name))
        assert all(function._expand_a(plan, g, 256, 64, 128, cpu)
                   for g in ("fprop", "dgrad", "wgrad"))
    monkeypatch.setitem(function.CONFIG, "EXPAND_MXFP8", False)
    for name in ("mxfp8", "fp8_blockwise"):
        plan = function.Plan(ms.Recipe.from_name(name))
        assert not any(function._expand_a(plan, g, 256, 64, 128, cpu)
                       for g in ("fprop", "dgrad", "wgrad"))


@pytest.mark.gpu
@pytest.mark.parametrize("recipe", ["nvfp4", "mxfp4", "mxfp8"])
def test_gpu_layer_with_expansion_equals_layer_without(recipe, monkeypatch):
    """On the GPU at a training shape: the expanded path is taken (the quantizer writes x's
    and dy's views expanded) and equals the codes path bit for bit."""
    from microscale.kernels.gemm_paths import takes_expanded
    fmt = "mxfp8_e4m3" if recipe == "mxfp8" else recipe
    assert takes_expanded(fmt, fmt, 4096, 768, 768, torch.device("cuda"))
    outs = []
    for expand in (True, False, "xt"):      # "xt": wgrad's xᵀ kept expanded too (EXPAND_XT)
        if not expand:
            monkeypatch.setattr(function, "_expand_a", lambda *a, **k: False)
        if expand == "xt":
            monkeypatch.setitem(function.CONFIG, "EXPAND_XT", True)
        torch.manual_seed(0)
        layer = ms.Linear(768, 1024, recipe=ms.Recipe.from_name(recipe).without_sr()).cuda()
        x = torch.randn(4096, 768, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        y = layer(x)
        y.backward(torch.randn_like(y))
        outs.append((y.detach(), x.grad, layer.weight.grad))
        if expand:
            path = ms.explain()[("scaled_mm", f"{fmt}x{fmt}")]
            assert ("A and B given expanded" if expand == "xt" else "expanded") in path, path
        monkeypatch.undo()
    for other in outs[1:]:
        for a, b in zip(outs[0], other):
            assert torch.equal(a, b)


@pytest.mark.gpu
@pytest.mark.parametrize("pair", ["mxfp8_e4m3", "mxfp4", "nvfp4_x", "nvfp4_dy", "nvfp4_dy_wide",
                                  "nvfp4_dy_nosr"])
def test_gpu_expanded_views_match_reference(pair):
    """Every expanded view on the GPU (written by the NVFP4 passes and the MXFP4 kernel, or
    decoded after the MXFP8 kernels), against the CPU reference's codes decoded, NaN, Inf and
    a huge value included. ``nvfp4_dy_wide``: a dy pair wider than 4096 columns; the defaults
    split every SR dy pair into two reg-pass launches (``SPLIT_MIN_COLS`` 0 since session 19),
    and an RNE one whose column view is expanded (``nvfp4_dy_nosr``, ``SPLIT_EXP_COL``)."""
    shape = (256, 8192) if pair == "nvfp4_dy_wide" else (4096, 768)
    x = _x(shape, seed=4)
    if pair in ("mxfp8_e4m3", "mxfp4"):
        fmt = QFormat(pair)
        row, col = (fmt, NF), (fmt, NF)
    else:
        g = torch.Generator().manual_seed(6)
        sr = pair.startswith("nvfp4_dy") and pair != "nvfp4_dy_nosr"
        bits = [{"stochastic": True, "rand_bits": torch.randint(0, 256, s, dtype=torch.uint8,
                                                                 generator=g)} if sr else {}
                for s in (shape, shape[::-1])]
        row, col = (N, {**NF, **bits[0]}), (N, {**NF, "rht": True, **bits[1]})
    on_gpu = [(f, {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in o.items()})
              for f, o in (row, col)]
    got = quantize_views(x.cuda(), (on_gpu[0][0], {**on_gpu[0][1], "expand": True}),
                         (on_gpu[1][0], {**on_gpu[1][1], "expand": True}), "triton")
    if pair in ("nvfp4_dy", "nvfp4_dy_wide", "nvfp4_dy_nosr"):
        assert "pair split" in ms.explain()[("quantize_rowcol", "nvfp4|nvfp4")]
    ref = quantize_views(x, row, col, "reference")
    for q, r in zip(got, ref):
        assert q.expanded and _same(q.data.cpu(), r.expand().data)


class _SharedInput(torch.nn.Module):
    """q, k and v of one input, as attention has them."""

    def __init__(self):
        super().__init__()
        self.q = torch.nn.Linear(64, 64, bias=False)
        self.k = torch.nn.Linear(64, 32, bias=False)
        self.v = torch.nn.Linear(64, 32, bias=False)

    def forward(self, x):
        return self.q(x).sum() + 2 * self.k(x).sum() + 3 * self.v(x).sum()


def _grads(model, x, compiled_graphs=None):
    """Gradients of one step; with ``compiled_graphs`` (a list) the model runs compiled and
    each backward graph is appended to it."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    def keep(gm, _):
        compiled_graphs.append(gm)
        return make_boxed_func(gm)
    run = model if compiled_graphs is None else torch.compile(
        model, fullgraph=True, backend=aot_autograd(   # Inductor's partitioner (it CSEs)
            fw_compiler=lambda gm, _: make_boxed_func(gm), bw_compiler=keep,
            partition_fn=min_cut_rematerialization_partition))
    model.zero_grad()
    run(x).backward()
    return [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("recipe", ["nvfp4", "mxfp8"])
def test_shared_xt_decoded_once_under_compile(recipe, monkeypatch):
    """``CONFIG["DECODE_XT_OP"]``: wgrad's kept xᵀ (codes) is decoded by the ``expand`` op, so
    q, k and v, which share x, decode it once in a compiled backward (the compiler's CSE merges
    the three identical calls), and every gradient keeps its bits: compiled against eager,
    and against the GEMM decoding xᵀ itself (xᵀ kept as codes: EXPAND_XT off, which a 64-wide
    input would otherwise keep expanded)."""
    monkeypatch.setitem(function.CONFIG, "EXPAND_XT", False)
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _SharedInput()
    ms.convert(model, ms.Recipe.from_name(recipe).without_sr(), keep_high_precision=[])
    x = torch.randn(128, 64)
    eager = _grads(model, x)
    graphs = []
    compiled = _grads(model, x, graphs)
    expands = [n for g in graphs for n in g.graph.nodes
               if n.target is torch.ops.microscale.expand.default]
    assert len(expands) == 1, graphs[0].code
    monkeypatch.setitem(function.CONFIG, "DECODE_XT_OP", False)
    no_op = _grads(model, x)
    for a, b, c in zip(eager, compiled, no_op):
        assert torch.equal(a, b) and torch.equal(a, c)


def test_expand_op_fake_and_errors():
    """The op's fake gives the decoded shape and dtype (opcheck), and FP8 is refused by name."""
    from microscale.ops import expand, operand_spec
    q = quantize_views(torch.randn(32, 64), (N, NF), None, "reference")[0]
    # (opcheck's schema-check mode has no multiply of fp8 scales on CPU: the fake only)
    torch.library.opcheck(torch.ops.microscale.expand.default,
                          (q.data, q.scale, q.amax, operand_spec(q), "reference"),
                          test_utils=("test_faketensor",))
    e = expand(q, "reference")
    assert e.expanded and e.data.dtype == torch.bfloat16 and e.data.shape == (32, 64)
    assert _same(e.data, q.expand().data) and expand(e, "reference") is e
    with pytest.raises(ValueError, match="expand"):
        expand(ms.quantize(torch.randn(4, 128), "fp8_block"), "reference")
    with pytest.raises(ValueError, match="must be NVFP4 / MXFP4 / MXFP8 codes"):
        torch.ops.microscale.expand(e.data, e.scale, e.amax, operand_spec(e), "reference")
