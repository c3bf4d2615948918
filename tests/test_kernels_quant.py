"""Fused quantization kernels vs the reference quantizers: bit for bit.

On CPU these run through Triton's interpreter (``TRITON_INTERPRET=1`` must be set before
Python starts, as the README's test command does); without it and without CUDA the module is
skipped. Every check compares codes, scale bytes and amax exactly, plus every metadata
field of the QuantizedTensor. Shapes: a few normal, a few odd (3-D inputs, rows that are not
a multiple of the kernel tile, a single block). ``gpu`` tests repeat the comparison on
larger CUDA tensors against the CPU reference.

RHT note: the rotation sums 16 (or 32) products in fp32, and the spec fixes no summation
order; the kernel (tensor cores or FMAs) and torch's matmul add in different orders. When every
chunk sum is exact in fp32 the order cannot matter, so RHT tests draw ``exact=True`` samples
(multiples of 1/16 below 16: 8 significant bits, sums exact) and then compare bit for bit.
For d = 32 (MXFP4) the entry fp32(1/sqrt(32)) is not a power of two; kernel and reference
both take the product as an exact ±1/8 sum times fp32(sqrt 2) (``hadamard.rht_factors``), so
the same ``exact=True`` samples give the same bits there too.
"""

from __future__ import annotations

import os

import pytest
import torch
from bitwise import same_values  # (tests/ is on sys.path)

import microscale as ms
from microscale.backend import KernelUnsupported

INTERP = os.environ.get("TRITON_INTERPRET", "0") == "1"
pytestmark = [
    pytest.mark.skipif(
        not (INTERP or torch.cuda.is_available()),
        reason="kernel tests need TRITON_INTERPRET=1 (set before Python starts) or a CUDA device"),
    # the interpreter runs kernels in numpy, which warns on the IEEE 1/0 = inf the spec uses
    pytest.mark.filterwarnings("ignore::RuntimeWarning"),
]
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")
from microscale.kernels.quant_rowcol_reg import pow2_scale  # noqa: E402  (needs triton)

CPU = torch.device("cpu")
NVFP4_SHAPES = [((16, 32), torch.bfloat16), ((48, 64), torch.float16),
                ((2, 24, 32), torch.float32), ((80, 48), torch.bfloat16)]
MX_SHAPES = [((16, 64), torch.bfloat16), ((2, 48, 96), torch.float32), ((96, 32), torch.float16)]
FP8_SHAPES = [((4, 128), torch.bfloat16), ((2, 64, 256), torch.float32),
              ((384, 128), torch.float16)]


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.uint8) if t.element_size() == 1 else t


def assert_same(q_k, q_r) -> None:
    """Kernel and reference QuantizedTensors agree in every field, bit for bit."""
    assert (q_k is None) == (q_r is None)
    if q_r is None:
        return
    for name in ("data", "scale", "amax"):
        a, b = getattr(q_k, name), getattr(q_r, name)
        assert a.dtype == b.dtype and a.shape == b.shape, (name, a.dtype, b.dtype, a.shape, b.shape)
        assert a.device == q_k.data.device and b.device == q_r.data.device
        diff = _bytes(a).cpu() != _bytes(b).cpu()
        assert not bool(diff.any()), f"{name}: {int(diff.sum())} of {diff.numel()} differ"
    for name in ("fmt", "shape", "orig_dtype", "block", "rht_d", "extra"):
        assert getattr(q_k, name) == getattr(q_r, name), name


def assert_expanded_is_codes(q, q0) -> None:
    """A view written expanded (``q``) equals the codes ``q0`` decoded (``q0.expand()``), NaN
    where they decode to NaN, with the same scale bytes."""
    want = q0.expand().data.float()
    assert q.expanded and torch.equal(torch.isnan(q.data.float()), torch.isnan(want))
    assert torch.equal(q.data.float().nan_to_num(7.0), want.nan_to_num(7.0))
    assert torch.equal(q.scale.view(torch.uint8), q0.scale.view(torch.uint8))


def sample(shape, dtype, spread: int = 0, seed: int = 0, exact: bool = False) -> torch.Tensor:
    """Random values (bf16-representable), optionally over 2^±spread, with zeros and -0.

    ``exact``: multiples of 1/16 in (-16, 16), so every RHT chunk sum is exact in fp32.
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * 3
    if exact:
        x = torch.randint(-255, 256, shape, generator=g).float() / 16
    if spread:
        lo, hi = (-10, 8) if dtype == torch.float16 else (-spread, spread)
        x = x * torch.exp2(torch.randint(lo, hi, shape, generator=g).float())
    x = x.to(torch.bfloat16).to(dtype)
    flat = x.view(-1)
    flat[:4] = 0.0
    flat[4] = -0.0
    return x


def both(fn):
    return fn("triton"), fn("reference")


# --------------------------------------------------------------------------- NVFP4
@pytest.mark.parametrize("shape,dtype", NVFP4_SHAPES)
@pytest.mark.parametrize("opts", [{}, {"rht": True}, {"block_2d": True}, {"stochastic": True}],
                         ids=["rne", "rht", "2d", "sr_bits"])
def test_nvfp4_quantize_exact(shape, dtype, opts):
    x = sample(shape, dtype, exact=bool(opts.get("rht")))
    if opts.get("stochastic"):
        opts = {**opts, "rand_bits": torch.randint(0, 256, shape, dtype=torch.uint8)}
    assert_same(*both(lambda be: ms.quantize(x, "nvfp4", backend=be, **opts)))


@pytest.mark.parametrize("shape,dtype", [((32, 48), torch.bfloat16), ((2, 48, 80), torch.float16),
                                         ((96, 64), torch.float32)])
def test_nvfp4_rowcol_exact(shape, dtype):
    """x for wgrad (row RNE, column RHT) and dy (row SR, column RHT + SR), one pass each."""
    x = sample(shape, dtype, exact=True)
    rows, cols = x.numel() // shape[-1], shape[-1]
    rb_row = torch.randint(0, 256, (rows, cols), dtype=torch.uint8)
    rb_col = torch.randint(0, 256, (cols, rows), dtype=torch.uint8)
    for row, col in [(("nvfp4", {}), ("nvfp4", {"rht": True})),
                     (("nvfp4", {"stochastic": True, "rand_bits": rb_row}),
                      ("nvfp4", {"rht": True, "stochastic": True, "rand_bits": rb_col})),
                     (None, ("nvfp4", {})), (("nvfp4", {"rht": True}), None)]:
        k, r = both(lambda be: ms.quantize_rowcol(x, row, col, backend=be))
        assert_same(k[0], r[0])
        assert_same(k[1], r[1])


@pytest.mark.parametrize("fmt,opts", [("nvfp4", {"rht": True}), ("nvfp4", {"block_2d": True}),
                                      ("mxfp8_e4m3", {}), ("fp8_block", {"block": (1, 128)})])
@pytest.mark.parametrize("which", ["row", "col", "both"])
def test_rowcol_op_outputs_are_fresh(fmt, opts, which):
    """Every output of the ``quantize_rowcol`` op starts its own storage, whichever views are
    asked: Inductor takes a custom op's outputs as fresh allocations and asserts their
    alignment (a column-only NVFP4 call once returned its amax at element 1 of the kernel's
    shared two-amax buffer; compiled hp_fprop layers failed that assert on CUDA)."""
    from microscale.ops import quantize_views
    x = sample((128, 256), torch.bfloat16, exact=True)
    view = (ms.QFormat(fmt), opts | {"check_finite": False})
    row, col = (view if which in ("row", "both") else None), (view if which != "row" else None)
    for q in quantize_views(x, row, col, "triton"):
        if q is not None:
            for t in (q.data, q.scale, q.amax):
                assert t.storage_offset() == 0, (fmt, which, t.dtype, t.storage_offset())


def test_nvfp4_edge_values():
    """amax = 0, a given amax, the SPEC worked block, huge and tiny magnitudes."""
    zeros = torch.zeros(16, 32, dtype=torch.bfloat16)
    assert_same(*both(lambda be: ms.quantize(zeros, "nvfp4", backend=be)))
    x = sample((32, 64), torch.float32, spread=60)
    given = torch.tensor(7.5)
    assert_same(*both(lambda be: ms.quantize(x, "nvfp4", backend=be, amax=given)))
    assert_same(*both(lambda be: ms.quantize(x, "nvfp4", backend=be)))
    spec = torch.tensor([0, .25, .5, .75, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, -2.5])
    q = ms.quantize(spec[None], "nvfp4", backend="triton", amax=torch.tensor(6.0))
    assert q.scale.view(torch.uint8).item() == 0x7E
    assert q.data[0].tolist() == [0x00, 0x21, 0x22, 0x43, 0x44, 0x65, 0x66, 0xC7]


def test_nvfp4_in_kernel_sr_seeded_and_unbiased():
    """Philox SR: torch.manual_seed fixes the codes; the mean of many draws tends to x."""
    x = sample((32, 64), torch.float32, seed=3)
    torch.manual_seed(7)
    a = ms.quantize(x, "nvfp4", backend="triton", stochastic=True)
    torch.manual_seed(7)
    b = ms.quantize(x, "nvfp4", backend="triton", stochastic=True)
    c = ms.quantize(x, "nvfp4", backend="triton", stochastic=True)
    assert torch.equal(a.data, b.data) and not torch.equal(a.data, c.data)
    g = torch.Generator().manual_seed(1)          # 64 draws as one call on 64 stacked copies
    draws = ms.quantize(x.repeat(64, 1), "nvfp4", backend="triton", stochastic=True,
                        generator=g).dequantize()   # (each element its own Philox counter)
    mean = draws.view(64, *x.shape).mean(0)
    rne_err = (ms.quantize(x, "nvfp4", backend="triton").dequantize() - x).abs().mean()
    assert (mean - x).abs().mean() < 0.4 * rne_err


@pytest.fixture
def reg_row_view(monkeypatch):
    """The reg pass's own row view: the row kernel (``quant_nvfp4.CONFIG['ROW1']``) off for
    views written as codes."""
    from microscale.kernels import quant_nvfp4
    monkeypatch.setitem(quant_nvfp4.CONFIG, "ROW1", {**quant_nvfp4.CONFIG["ROW1"], "codes": False})


def _reg_pass_views(rows: int, cols: int) -> list:
    """The (row, column) view pairs a reg-pass test checks on an x of ``[rows, cols]``: every
    pair a training step asks for (SR with caller bytes) and the single views, SR row alone
    included."""
    nf = {"check_finite": False}
    rb_row = torch.randint(0, 256, (rows, cols), dtype=torch.uint8)
    rb_col = torch.randint(0, 256, (cols, rows), dtype=torch.uint8)
    sr_row = ("nvfp4", {**nf, "stochastic": True, "rand_bits": rb_row})
    return [(("nvfp4", nf), ("nvfp4", {**nf, "rht": True})),
            (sr_row, ("nvfp4", {**nf, "rht": True, "stochastic": True, "rand_bits": rb_col})),
            (("nvfp4", nf), ("nvfp4", {**nf, "stochastic": True, "rand_bits": rb_col})),
            (None, ("nvfp4", {**nf, "rht": True})), (("nvfp4", nf), None), (sr_row, None)]


@pytest.mark.parametrize("shape,dtype", [
    ((512, 128), torch.bfloat16), ((256, 64), torch.float16), ((2, 128, 192), torch.float32),
    ((272, 80), torch.bfloat16)], ids=["even-bf16", "even-fp16", "even-fp32", "masked-bf16"])
def test_nvfp4_reg_pass_exact(shape, dtype, monkeypatch, reg_row_view, gpu_tiles):
    """The "reg" pass (quant_nvfp4_reg) on whole [256, 64] tiles and on partial ones, with
    NaN, +-Inf and values past the RHT's input clamp: every view a training step asks for,
    and the single views, bit for bit with the reference. At the GPU's tiles (the suite's
    interpreter runs take wider ones elsewhere, ``conftest._interpreter_tiles``)."""
    from microscale.kernels import quant_nvfp4
    gpu_tiles("quant_nvfp4", "REG", "REG_ROW", "REG_COL")
    monkeypatch.setitem(quant_nvfp4.CONFIG, "REG", {**quant_nvfp4.CONFIG["REG"], "ROW_SR": True})
    monkeypatch.setitem(quant_nvfp4.CONFIG, "SPLIT_X_MAX_COLS", 0)   # the x pair in one launch
    x = sample(shape, dtype, exact=True, seed=4)
    flat = x.view(-1, shape[-1])
    flat[5, 7], flat[40, 33], flat[41, 2], flat[100, 17] = (float("nan"), float("inf"),
                                                            -float("inf"), -float("nan"))
    if dtype != torch.float16:
        flat[30, 40], flat[31, 41] = 3e38, -1e38                # above 2^125: clamped
    for row, col in _reg_pass_views(*flat.shape):
        k = ms.quantize_rowcol(x, row, col, backend="triton")
        key = f"{'nvfp4' if row else 'none'}|{'nvfp4' if col else 'none'}"
        # RNE rows beside SR columns split (SPLIT_SR_COL): two reg-pass launches
        split = row is not None and col is not None and "stochastic" not in row[1] \
            and "stochastic" in col[1]
        assert ms.explain()[("quantize_rowcol", key)].startswith(
            "triton (NVFP4 pair split" if split else "triton (NVFP4 reg pass")
        r = ms.quantize_rowcol(x, row, col, backend="reference")
        assert_same(k[0], r[0])
        assert_same(k[1], r[1])


@pytest.mark.parametrize("shape,dtype,device", [
    ((256, 64), torch.float16, "cpu"), ((272, 80), torch.bfloat16, "cpu"),
    pytest.param((4096, 768), torch.bfloat16, "cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("fast", [True, False])
def test_nvfp4_reg_pass_e2m1_codes_exact(shape, dtype, device, fast, monkeypatch, reg_row_view):
    """Both ways the reg pass makes E2M1 codes (``CONFIG['FAST_E2M1']``: from the rounded
    value, the default, or from the compare-and-select chain) give the reference's bits in every
    view it writes as codes (row and column, RNE and SR, with and without the RHT; one launch
    and split), NaN and Inf included."""
    from microscale.kernels import quant_nvfp4
    monkeypatch.setitem(quant_nvfp4.CONFIG, "FAST_E2M1", fast)
    monkeypatch.setitem(quant_nvfp4.CONFIG, "SPLIT_X_MAX_COLS", 0)   # the x pair in one launch
    x = sample(shape, dtype, exact=True, seed=9)
    x[5, 7], x[40, 33], x[41, 2] = float("nan"), float("inf"), -float("inf")
    for row, col in _reg_pass_views(*shape):
        on = [(v[0], {k: t.to(device) if isinstance(t, torch.Tensor) else t
                      for k, t in v[1].items()}) if v else None for v in (row, col)]
        k = ms.quantize_rowcol(x.to(device), *on, backend="triton")
        r = ms.quantize_rowcol(x, row, col, backend="reference")
        assert_same(k[0], r[0])
        assert_same(k[1], r[1])


@pytest.mark.parametrize("shape,device", [
    ((256, 64), "cpu"), ((272, 80), "cpu"),
    pytest.param((4096, 768), "cuda", marks=pytest.mark.gpu)])
def test_nvfp4_col_views_see_the_rht_clamp(shape, device, monkeypatch, gpu_tiles):
    """bf16 RHT column views (codes and expanded, RNE and SR, one launch and split) clamp
    their input to ±2^125 (on the raw words since session 59), on data where the clamp
    changes the bits: no Inf (an Inf saturates every scale), and 16-row chunks holding one
    value past 2^125 beside big values under it, so that clamping changes their ratio (the
    sums stay exact in fp32: any summation order gives the reference's bits)."""
    from microscale.kernels import quant_nvfp4
    from microscale.ops import quantize_views
    from microscale.tensor import QFormat
    gpu_tiles("quant_nvfp4", "REG", "REG_ROW", "REG_COL")
    monkeypatch.setitem(quant_nvfp4.CONFIG, "SPLIT_X_MAX_COLS", 0)   # the x pair in one launch
    x = sample(shape, torch.bfloat16, exact=True, seed=5)
    for c, r0 in ((3, 16), (40, 64), (shape[1] - 1, shape[0] - 16)):
        x[r0:r0 + 16, c] = 0.0
        x[r0, c], x[r0 + 5, c], x[r0 + 9, c] = 3e38, 2.0 ** 124, -(2.0 ** 123)
    x[7, 9] = float("nan")
    nf = {"check_finite": False}
    rb_col = torch.randint(0, 256, shape[::-1], dtype=torch.uint8)
    cols = [("nvfp4", {**nf, "rht": True}),
            ("nvfp4", {**nf, "rht": True, "stochastic": True, "rand_bits": rb_col})]
    x_d = x.to(device)
    for row in (None, ("nvfp4", nf)):
        key = ("quantize_rowcol", f"{'nvfp4' if row else 'none'}|nvfp4")
        for col in cols:
            col_d = (col[0], {k: v.to(device) if isinstance(v, torch.Tensor) else v
                              for k, v in col[1].items()})
            r = ms.quantize_rowcol(x, row, col, backend="reference")
            assert_same(ms.quantize_rowcol(x_d, row, col_d, backend="triton")[1], r[1])
            assert "reg pass" in ms.explain()[key]             # the column view: col_tile
            exp = quantize_views(x_d, row and (QFormat.NVFP4, row[1]),
                                 (QFormat.NVFP4, {**col_d[1], "expand": True}), "triton")
            assert "reg pass" in ms.explain()[key]
            assert exp[1].expanded and same_values(exp[1].data.cpu(), r[1].expand().data)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_nvfp4_reg_amax_rounds_the_rotated_maximum(dtype, monkeypatch):
    """The reg amax pass keeps the rotated values unrounded and rounds their maximum once
    (``_rht.finish_rotated``, valid since the rounding is monotone). On data whose RHT sums are
    exact in fp32 but not in the input dtype, with no Inf or NaN to dominate the maximum, the
    column view's amax (and so every scale) equals the reference's; the fp32 maximum would not."""
    from microscale.hadamard import rht
    from microscale.kernels import quant_nvfp4
    monkeypatch.setitem(quant_nvfp4.CONFIG, "SPLIT_X_MAX_COLS", 0)   # the x pair in one launch
    x = sample((512, 128), dtype, exact=True, seed=9)       # a seed whose maximum rounds
    nf = {"check_finite": False}
    views = (("nvfp4", nf), ("nvfp4", {**nf, "rht": True}))
    k = ms.quantize_rowcol(x, *views, backend="triton")
    assert ms.explain()[("quantize_rowcol", "nvfp4|nvfp4")].startswith("triton (NVFP4 reg pass")
    r = ms.quantize_rowcol(x, *views, backend="reference")
    assert_same(k[0], r[0])
    assert_same(k[1], r[1])
    assert rht(x.float().t().contiguous()).abs().max() != r[1].amax     # the rounding matters


@pytest.mark.parametrize("shape,dtype", [((1, 16), torch.float32), ((37, 48), torch.bfloat16),
                                         ((3, 5, 32), torch.float16)])
def test_nvfp4_reg_pass_row_view_any_row_count(shape, dtype, monkeypatch, reg_row_view):
    """A row view alone takes any number of rows (only the column view needs multiples of
    16): rows past the end of a 16-row group are masked, not read (found by hypothesis in
    test_properties: a (1, 16) fp32 input read 15 rows past the tensor). SR through the reg
    pass too (REG['ROW_SR'] on)."""
    from microscale.kernels import quant_nvfp4
    monkeypatch.setitem(quant_nvfp4.CONFIG, "REG", {**quant_nvfp4.CONFIG["REG"], "ROW_SR": True})
    x = sample(shape, dtype, spread=40 if dtype != torch.float16 else 0, seed=1)
    for opts in ({}, {"stochastic": True,
                      "rand_bits": torch.randint(0, 256, shape, dtype=torch.uint8)}):
        k = ms.quantize(x, "nvfp4", backend="triton", **opts)
        assert ms.explain()[("quantize", "nvfp4")].startswith("triton (NVFP4 reg pass")
        assert_same(k, ms.quantize(x, "nvfp4", backend="reference", **opts))


def test_nvfp4_lone_sr_row_view_takes_the_reg_pass(reg_row_view):
    """With REG['ROW_SR'] off (the default), a stochastically rounded row view alone still
    runs the reg pass (the launch a split SR pair makes second) where the row kernel is off
    (``ROW1``), bit for bit with the reference: caller bits, NaN and Inf, bf16 and a partial
    tile."""
    from microscale.kernels import quant_nvfp4
    assert quant_nvfp4.CONFIG["REG"]["ROW_SR"] is False
    for shape in [(256, 64), (48, 80)]:
        x = sample(shape, torch.bfloat16, exact=True, seed=6)
        x[3, 5], x[7, 9], x[11, 1] = float("nan"), float("inf"), -3e38
        bits = torch.randint(0, 256, shape, dtype=torch.uint8)
        opts = {"stochastic": True, "rand_bits": bits, "check_finite": False}
        k = ms.quantize(x, "nvfp4", backend="triton", **opts)
        assert ms.explain()[("quantize", "nvfp4")].startswith("triton (NVFP4 reg pass")
        assert_same(k, ms.quantize(x, "nvfp4", backend="reference", **opts))


@pytest.mark.parametrize("tiles", [
    ({"NI": 8, "BC": 64, "num_warps": 2}, {"NI": 16, "BC": 64, "num_warps": 4}),
    ({"NI": 32, "BC": 32, "num_warps": 4}, {"NI": 8, "BC": 32, "num_warps": 2}),
    ({"NI": 16, "BC": 64, "num_warps": 4},
     {"NI": 16, "BC": 16, "num_warps": 4, "PREFETCH": True})],
    ids=["row8x64-col16x64", "row32x32-col8x32", "col16x16-prefetch"])
def test_nvfp4_one_view_launch_tiles_exact(tiles, monkeypatch):
    """Reg-pass launches with one view take their tile from REG_ROW / REG_COL (the row view
    alone loading two raw tiles at a time): other tiles give the reference's bits for the
    views alone and for both split pairs (SR rows + RHT/SR columns, RNE rows + RHT/SR
    columns), partial tiles, NaN and Inf included, and fewer programs than tiles."""
    from microscale.kernels import quant_nvfp4
    for key, tile in zip(("REG_ROW", "REG_COL"), tiles):
        monkeypatch.setitem(quant_nvfp4.CONFIG, key, {**quant_nvfp4.CONFIG[key], **tile})
    x = sample((272, 80), torch.bfloat16, exact=True, seed=8)
    x[5, 7], x[40, 33], x[100, 2] = float("nan"), float("inf"), -3e38
    nf = {"check_finite": False}
    rb_r = torch.randint(0, 256, (272, 80), dtype=torch.uint8)
    rb_c = torch.randint(0, 256, (80, 272), dtype=torch.uint8)
    sr_row = ("nvfp4", {**nf, "stochastic": True, "rand_bits": rb_r})
    sr_col = ("nvfp4", {**nf, "rht": True, "stochastic": True, "rand_bits": rb_c})
    for row, col in [(sr_row, sr_col), (("nvfp4", nf), sr_col), (sr_row, None),
                     (("nvfp4", nf), None), (None, ("nvfp4", {**nf, "rht": True}))]:
        k = ms.quantize_rowcol(x, row, col, backend="triton")
        r = ms.quantize_rowcol(x, row, col, backend="reference")
        assert_same(k[0], r[0])
        assert_same(k[1], r[1])


@pytest.mark.parametrize("prologue", [None, "relu_square"])
def test_nvfp4_column_prefetch_same_bits(prologue, monkeypatch):
    """A column view alone with ``REG_COL["PREFETCH"]`` (the next tile's raw tiles loaded
    before this tile is quantized) writes what the plain loop writes: in-kernel Philox and
    written expanded (which the reference comparisons above do not reach), with a prologue
    applied as the tiles load, partial tiles and more tiles than programs; and so does
    ``REG_COL["PHILOX_WIDE"]`` (Philox's products as wide multiplies: the same words)."""
    from microscale.kernels import quant_nvfp4
    from microscale.ops import quantize_views
    from microscale.tensor import QFormat
    x = sample((272, 80), torch.bfloat16, exact=True, seed=9)
    x[5, 7], x[100, 2] = float("nan"), -float("inf")
    seed = torch.tensor([11], dtype=torch.int32)
    col = (QFormat.NVFP4, {"check_finite": False, "rht": True, "stochastic": True,
                           "seed": seed, "expand": True})
    outs = []
    for prefetch, wide in ((False, False), (True, False), (True, True)):
        monkeypatch.setitem(quant_nvfp4.CONFIG, "REG_COL", {
            **quant_nvfp4.CONFIG["REG_COL"], "NI": 16, "BC": 16, "PREFETCH": prefetch,
            "PHILOX_WIDE": wide})
        outs.append(quantize_views(x, None, col, "triton", prologue=prologue or "",
                                   x2=None)[1])
        assert "reg pass" in ms.explain()[("quantize_rowcol", "none|nvfp4")]
    a = outs[0]                     # expanded: bf16 data, NaN in the NaN block (compare bits)
    for b in outs[1:]:
        assert a.expanded and b.expanded
        assert torch.equal(a.data.view(torch.int16), b.data.view(torch.int16))
        assert torch.equal(a.scale.view(torch.uint8), b.scale.view(torch.uint8))
        assert torch.equal(a.amax, b.amax)


def test_nvfp4_reg_pass_says_why_not(monkeypatch):
    """Views the reg pass does not take run the rows pass, and ms.explain() says why."""
    from microscale.kernels import quant_nvfp4
    assert quant_nvfp4.CONFIG["REG"]["ROW_SR"] is False          # the default this tests
    monkeypatch.setitem(quant_nvfp4.CONFIG, "SPLIT", False)       # else the SR pair splits
    x = sample((256, 64), torch.bfloat16, exact=True)
    bits = torch.randint(0, 256, (256, 64), dtype=torch.uint8)
    bits_t = torch.randint(0, 256, (64, 256), dtype=torch.uint8)
    # (a row view with the RHT alone runs the row kernel: test_kernels_nvfp4_row.py)
    for row, col, why in [(("nvfp4", {"rht": True}), ("nvfp4", {"rht": True}),
                           "row view with the RHT"),
                          (("nvfp4", {"stochastic": True, "rand_bits": bits}),
                           ("nvfp4", {"rht": True, "stochastic": True, "rand_bits": bits_t}),
                           "stochastically rounded row view beside a column view"),
                          (("nvfp4", {"block_2d": True}), ("nvfp4", {"block_2d": True}),
                           "16x16 (2D) scales")]:
        k = ms.quantize_rowcol(x, row, col, backend="triton")
        path = ms.explain()[("quantize_rowcol", f"nvfp4|{'nvfp4' if col else 'none'}")]
        r = ms.quantize_rowcol(x, row, col, backend="reference")
        assert_same(k[0], r[0])
        assert_same(k[1], r[1])
        assert "rows pass" in path and why in path, path


# --------------------------------------------------------------------------- MX
@pytest.mark.parametrize("shape,dtype", MX_SHAPES)
@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp4"])
@pytest.mark.parametrize("rounding", ["ceil", "floor"])
def test_mx_quantize_exact(shape, dtype, fmt, rounding):
    x = sample(shape, dtype, spread=40)
    assert_same(*both(lambda be: ms.quantize(x, fmt, backend=be, scale_rounding=rounding)))


@pytest.mark.parametrize("shape,dtype", MX_SHAPES[:2])
def test_mxfp4_sr_bits_exact(shape, dtype):
    x = sample(shape, dtype)
    bits = torch.randint(0, 256, shape, dtype=torch.uint8)
    assert_same(*both(lambda be: ms.quantize(x, "mxfp4", backend=be, stochastic=True,
                                             rand_bits=bits)))


def assert_mx_rht32_close(q_k, q_r, max_frac: float = 2e-3) -> None:
    """d = 32 on data whose chunk sums may not be exact in fp32: a last-bit difference of a
    rotated value may move a few codes by one step."""
    assert (q_k.data.cpu() != q_r.data).float().mean() <= max_frac
    assert (q_k.scale.cpu() != q_r.scale).float().mean() <= max_frac
    assert torch.allclose(q_k.amax.cpu(), q_r.amax, rtol=1e-6, atol=0)
    err = (q_k.dequantize(undo_rht=False).cpu() - q_r.dequantize(undo_rht=False)).abs()
    assert float(err.max()) <= 2 * float(q_r.block_scales().max())
    for name in ("fmt", "shape", "orig_dtype", "block", "rht_d", "extra"):
        assert getattr(q_k, name) == getattr(q_r, name), name


@pytest.mark.parametrize("shape,dtype", MX_SHAPES[:2])
def test_mxfp4_rht32_exact(shape, dtype):
    """d = 32 rotations (row view: a 2-D dot; column view: the batched one) bit for bit."""
    x = sample(shape, dtype, exact=True)
    assert_same(*both(lambda be: ms.quantize(x, "mxfp4", backend=be, rht=True)))
    if (x.numel() // shape[-1]) % 32 == 0:    # the column view's RHT runs along x's rows
        k, r = both(lambda be: ms.quantize_rowcol(x, None, ("mxfp4", {"rht": True}), backend=be))
        assert_same(k[1], r[1])


def test_rht32_is_the_correctly_rounded_product():
    """The reference's d = 32 rotation equals x·M computed in float64 and rounded once to fp32
    (then to the input dtype) when the chunk sums are exact; the plain fp32 matmul does not
    always (its products round), which is why both sides use the ±1/8 form."""
    from microscale.hadamard import rht, rht_matrix
    x = sample((64, 256), torch.float32, exact=True)
    m = rht_matrix(32)
    want = (x.double().reshape(64, 8, 32) @ m.double()).float().reshape(64, 256)
    assert torch.equal(rht(x, 32), want)
    plain = (x.reshape(64, 8, 32) @ m).reshape(64, 256)
    assert not torch.equal(plain, want)


@pytest.mark.parametrize("br", [32, 64])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_mxfp4_column_view_in_registers_exact(dtype, br, monkeypatch):
    """``quant_mx.CONFIG['COL_REG']``: the MXFP4 column view with a 32-row block in one thread
    (``quant_mx_col``) against the reference (RNE, RHT 32, caller bits; NaN, Inf and a huge
    value) and against the other column path (in-kernel Philox: the same stream), codes and
    expanded; one and two 32-row groups a tile, a partial column tile (160 = 128 + 32)."""
    from microscale import ops
    from microscale.kernels import quant_mx
    from microscale.tensor import QFormat
    monkeypatch.setitem(quant_mx.CONFIG, "BR", br)
    x = sample((64 if br == 32 else 128, 160), dtype, exact=True)
    flat = x.view(-1)
    flat[37], flat[300], flat[5000] = float("nan"), float("inf"), -60000.0
    nf = {"check_finite": False}
    rb = torch.randint(0, 256, (160, x.shape[0]), dtype=torch.uint8)
    monkeypatch.setitem(quant_mx.CONFIG, "COL_REG", True)
    for col in [{}, {"rht": True}, {"rht": True, "stochastic": True, "rand_bits": rb}]:
        k, r = both(lambda be: ms.quantize_rowcol(x, None, ("mxfp4", {**nf, **col}), backend=be))
        assert_same(k[1], r[1])
    m4, seed = QFormat.MXFP4, torch.tensor([11])
    for expand in (False, True):
        view = (m4, {**nf, "rht": True, "stochastic": True, "seed": seed, "expand": expand})
        got = ops.quantize_views(x, (m4, nf), view, "triton")[1]
        monkeypatch.setitem(quant_mx.CONFIG, "COL_REG", False)
        want = ops.quantize_views(x, (m4, nf), view, "triton")[1]
        monkeypatch.setitem(quant_mx.CONFIG, "COL_REG", True)
        assert got.expanded == want.expanded == expand
        for a, b in ((got.data, want.data), (got.scale, want.scale)):
            assert torch.equal(_bytes(a).view(torch.uint8), _bytes(b).view(torch.uint8))
        assert torch.equal(got.amax, want.amax)


@pytest.mark.parametrize("pack", [False, True])
def test_mx_rowcol_exact(pack, monkeypatch, gpu_tiles):
    """Both views, MXFP8 column stores as bytes or as packed words (quant_mx.CONFIG); at the
    GPU's tile rows (two tiles of 32; the suite's interpreter runs take 128 elsewhere)."""
    from microscale.kernels import quant_mx
    gpu_tiles("quant_mx", "BR")
    monkeypatch.setitem(quant_mx.CONFIG, "PACK_COL", pack)
    x = sample((64, 96), torch.bfloat16, exact=True)
    rb = torch.randint(0, 256, (96, 64), dtype=torch.uint8)
    for row, col in [(("mxfp8_e4m3", {}), ("mxfp8_e4m3", {})),
                     (("mxfp8_e5m2", {"scale_rounding": "floor"}), None),
                     (("mxfp4", {}), ("mxfp4", {"stochastic": True, "rand_bits": rb})),
                     (None, ("mxfp8_e4m3", {}))]:
        k, r = both(lambda be: ms.quantize_rowcol(x, row, col, backend=be))
        assert_same(k[0], r[0])
        assert_same(k[1], r[1])


@pytest.mark.parametrize("shape,dtype", [((256, 384), torch.bfloat16), ((128, 128), torch.float16),
                                         ((384, 256), torch.float32)])
def test_mx_rowcol_reg_exact(shape, dtype, monkeypatch):
    """MXFP8 pairs through the register-resident kernel (quant_rowcol_reg): mixed element
    types and scale roundings, wide exponent spread, +-NaN and +-Inf; shapes that do not tile
    by 128 and MXFP4 views still take quant_mx's own kernel (checked the same way)."""
    from microscale.kernels import quant_mx
    monkeypatch.setitem(quant_mx.CONFIG, "ROWCOL", "reg")
    x = sample(shape, dtype, spread=30)
    x[5, 7], x[70, 9], x[3, 2], x[9, 100] = float("nan"), -float("nan"), float("inf"), -float("inf")
    nf = {"check_finite": False}
    for row, col in [(("mxfp8_e4m3", nf), ("mxfp8_e4m3", nf)),
                     (("mxfp8_e4m3", nf), ("mxfp8_e5m2", {**nf, "scale_rounding": "floor"})),
                     (("mxfp8_e5m2", nf), ("mxfp8_e4m3", nf))]:
        k, r = both(lambda be: ms.quantize_rowcol(x, row, col, backend=be))
        assert_same(k[0], r[0])
        assert_same(k[1], r[1])
    y = sample((96, 64), dtype)              # not whole tiles: quant_mx's kernel
    k, r = both(lambda be: ms.quantize_rowcol(y, ("mxfp8_e4m3", {}), ("mxfp8_e4m3", {}),
                                              backend=be))
    assert_same(k[0], r[0])
    assert_same(k[1], r[1])
    monkeypatch.setitem(quant_mx.CONFIG, "ROWCOL", "regs")
    with pytest.raises(ValueError, match="MICROSCALE_MX_ROWCOL"):
        ms.quantize_rowcol(x, ("mxfp8_e4m3", nf), ("mxfp8_e4m3", nf), backend="triton")


@pytest.mark.parametrize("br,bc", [(64, 128), (32, 128), (32, 64), (128, 128)])
def test_mx_rowcol_reg_tile_rows_exact(br, bc, monkeypatch):
    """The MXFP8 register pair kernel on [BR, BC] tiles (``quant_mx.CONFIG['BR_reg']``,
    ``['BC_reg']``): codes against the reference, and the views written expanded against the
    codes decoded, with +-NaN, +-Inf, a wide exponent spread and fewer programs than tiles."""
    from microscale.kernels import quant_mx
    from microscale.ops import quantize_views
    from microscale.tensor import QFormat
    monkeypatch.setitem(quant_mx.CONFIG, "ROWCOL", "reg")
    monkeypatch.setitem(quant_mx.CONFIG, "BR_reg", br)
    monkeypatch.setitem(quant_mx.CONFIG, "BC_reg", bc)
    monkeypatch.setitem(quant_mx.CONFIG, "num_warps_reg", 4 if br >= 64 else 2 if bc == 128
                        else 1)
    x = sample((256, 384), torch.bfloat16, spread=30, seed=3)
    x[5, 7], x[70, 9], x[3, 2], x[99, 100] = float("nan"), -float("nan"), float("inf"), \
        -float("inf")
    nf = {"check_finite": False}
    for row, col in [(("mxfp8_e4m3", nf), ("mxfp8_e4m3", nf)),
                     (("mxfp8_e5m2", nf), ("mxfp8_e4m3", {**nf, "scale_rounding": "floor"}))]:
        k = ms.quantize_rowcol(x, row, col, backend="triton")
        assert "tile in registers" in ms.explain()[("quantize_rowcol", f"{row[0]}|{col[0]}")]
        r = ms.quantize_rowcol(x, row, col, backend="reference")
        assert_same(k[0], r[0])
        assert_same(k[1], r[1])
    e4 = QFormat.MXFP8_E4M3
    codes = quantize_views(x, (e4, nf), (e4, nf), "triton")
    got = quantize_views(x, (e4, {**nf, "expand": True}), (e4, {**nf, "expand": True}), "triton")
    for q, q0 in zip(got, codes):
        assert_expanded_is_codes(q, q0)
    # one view alone, expanded (a recomputed input's column view, nn.recompute): the same
    # kernel with the other view off
    for row, col, q0 in (((e4, {**nf, "expand": True}), None, codes[0]),
                         (None, (e4, {**nf, "expand": True}), codes[1])):
        q = quantize_views(x, row, col, "triton")[0 if row else 1]
        assert "MXFP8 view: tile in registers" in ms.explain()[
            ("quantize_rowcol", "mxfp8_e4m3|none" if row else "none|mxfp8_e4m3")]
        assert_expanded_is_codes(q, q0)
        assert torch.equal(q.amax, q0.amax)
    if br == 64:                 # [64, 128] with 2 warps wrote wrong bits on an H100: refused
        monkeypatch.setitem(quant_mx.CONFIG, "num_warps_reg", 2)
        with pytest.raises(ValueError, match="2 warps"):
            ms.quantize_rowcol(x, ("mxfp8_e4m3", nf), ("mxfp8_e4m3", nf), backend="triton")
    if bc == 64:
        monkeypatch.setitem(quant_mx.CONFIG, "BC_reg", 32)
        with pytest.raises(ValueError, match="BC_reg"):
            ms.quantize_rowcol(x, ("mxfp8_e4m3", nf), ("mxfp8_e4m3", nf), backend="triton")


def test_fp8_pair_stages_by_variant():
    """The FP8 pair kernel pipelines 3 stages deep except where a tile stages twice the bytes
    (an fp32 input, a two-input prologue), where a third stage spills (offline SASS)."""
    from microscale.kernels import quant_fp8
    narrow, wide = quant_fp8.CONFIG["NUM_STAGES_reg"], quant_fp8.CONFIG["NUM_STAGES_reg_wide"]
    assert (narrow, wide) == (3, 2)
    assert quant_fp8.reg_stages(torch.bfloat16) == narrow
    assert quant_fp8.reg_stages(torch.float16, ("relu_square", None)) == narrow
    assert quant_fp8.reg_stages(torch.bfloat16, ("square", None)) == narrow
    assert quant_fp8.reg_stages(torch.float32) == wide
    assert quant_fp8.reg_stages(torch.bfloat16, ("relu_square_grad", None)) == wide
    assert quant_fp8.reg_stages(torch.bfloat16, ("mul", None)) == wide


@pytest.mark.parametrize("device", [pytest.param("cpu", marks=pytest.mark.skipif(
    not INTERP, reason="CPU tensors run kernels in the interpreter")),
    pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("n_experts,n", [(2, 128), (4, 32)])
def test_mx_pairs_experts_exact(n_experts, n, device, monkeypatch):
    """Stacked expert weights' MXFP8 W and per-expert Wᵀ from one register-kernel call (the
    column view per expert segment): each expert's views equal its own reference
    quantization."""
    from microscale.kernels import quant_mx
    monkeypatch.setitem(quant_mx.CONFIG, "ROWCOL", "reg")
    w = sample((n_experts * n, 256), torch.bfloat16, spread=20, seed=4)
    nf = {"check_finite": False}
    (wd, ws), (td, ts) = quant_mx.mx_pairs_experts(w.to(device), n_experts,
                                                   ("mxfp8_e4m3", nf), ("mxfp8_e4m3", nf), False)
    wd, ws, td, ts = (t.cpu() for t in (wd, ws, td, ts))
    for e in range(n_experts):
        w_e = w[e * n:(e + 1) * n]
        for got, x in (((wd[e * n:(e + 1) * n], ws[e * n:(e + 1) * n]), w_e),
                       ((td[e], ts[e]), w_e.t().contiguous())):
            ref = ms.quantize(x, "mxfp8_e4m3", backend="reference", check_finite=False)
            assert torch.equal(got[0].view(torch.uint8), ref.data.view(torch.uint8))
            assert torch.equal(got[1].view(torch.uint8), ref.scale.view(torch.uint8))


def test_mxfp4_in_kernel_sr_seeded():
    x = sample((32, 64), torch.float32, seed=5)
    torch.manual_seed(11)
    a = ms.quantize_rowcol(x, ("mxfp4", {"stochastic": True}), ("mxfp4", {"stochastic": True}),
                           backend="triton")
    torch.manual_seed(11)
    b = ms.quantize_rowcol(x, ("mxfp4", {"stochastic": True}), ("mxfp4", {"stochastic": True}),
                           backend="triton")
    assert torch.equal(a[0].data, b[0].data) and torch.equal(a[1].data, b[1].data)
    assert_same(a[0], a[0])
    rne = ms.quantize(x, "mxfp4", backend="triton")
    assert torch.equal(a[0].scale, rne.scale)           # SR changes codes, never scales
    assert not torch.equal(a[0].data, rne.data)


# --------------------------------------------------------------------------- FP8 blockwise
@pytest.mark.parametrize("shape,dtype", FP8_SHAPES)
@pytest.mark.parametrize("opts", [{}, {"pow2_scales": False}, {"fp8_dtype": torch.float8_e5m2},
                                  {"block": (128, 128)}, {"block": (128, 128), "pow2_scales": False}],
                         ids=["1x128", "1x128_fp32", "1x128_e5m2", "128x128", "128x128_fp32"])
def test_fp8_block_exact(shape, dtype, opts):
    x = sample(shape, dtype, spread=40)
    if opts.get("block") == (128, 128) and (x.numel() // shape[-1]) % 128:
        for be in ("triton", "reference"):   # both refuse rows % 128 != 0 the same way
            with pytest.raises(ValueError, match="divisible by 128"):
                ms.quantize(x, "fp8_block", backend=be, **opts)
        return
    assert_same(*both(lambda be: ms.quantize(x, "fp8_block", backend=be, **opts)))


@pytest.mark.parametrize("pow2,shape,mode", [(True, (128, 256), "tile"), (False, (128, 256), "tile"),
                                             (True, (384, 128), "tile"), (True, (128, 256), "sub"),
                                             (False, (256, 384), "sub"),
                                             (True, (256, 256), "sub-bytes"),
                                             (True, (256, 384), "reg"), (False, (128, 256), "reg"),
                                             (True, (384, 128), "reg-e5m2"),
                                             (True, (128, 256), "reg-fp16")])
def test_fp8_block_rowcol_exact(pow2, shape, mode, monkeypatch):
    """Both views of every tile, several row tiles too, with each row+column kernel (the
    sub-tiled one storing its column view as packed words or as single bytes; "reg" falls back
    to "sub" for non-pow2 scales)."""
    from microscale.kernels import quant_fp8
    monkeypatch.setitem(quant_fp8.CONFIG, "ROWCOL", mode.split("-")[0])
    monkeypatch.setitem(quant_fp8.CONFIG, "PACK_COL", mode != "sub-bytes")
    fp16 = mode.endswith("fp16")
    x = sample(shape, torch.float16 if fp16 else torch.bfloat16, spread=8 if fp16 else 30)
    x[5, 7] = float("nan")                   # read as 0, stored as the NaN byte
    x[70, 9] = -float("nan")                 # either sign: the byte is 0x7F
    x[3, 2], x[9, 130 % shape[1]] = float("inf"), -float("inf")   # unit scale, saturated
    fp8 = torch.float8_e5m2 if mode.endswith("e5m2") else torch.float8_e4m3fn
    view = ("fp8_block", {"pow2_scales": pow2, "check_finite": False, "fp8_dtype": fp8})
    for row, col in [(view, view), (None, view), (view, None)]:
        k, r = both(lambda be: ms.quantize_rowcol(x, row, col, backend=be))
        assert_same(k[0], r[0])
        assert_same(k[1], r[1])


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_register_kernels_exact_in_either_tile_order(reverse, monkeypatch):
    """The register kernels that can walk their tiles from the last one back (the FP8 1x128
    and MXFP8 pairs, the NVFP4 amax pass: REVERSE_reg, REG_AMAX's REVERSE) give the reference's
    bits either way, on several row and column tiles and fewer programs than tiles; the split
    NVFP4 pair (its two launches after the amax pass) too."""
    from microscale.kernels import quant_fp8, quant_mx, quant_nvfp4
    monkeypatch.setitem(quant_fp8.CONFIG, "REVERSE_reg", reverse)
    monkeypatch.setitem(quant_mx.CONFIG, "REVERSE_reg", reverse)
    monkeypatch.setitem(quant_nvfp4.CONFIG, "REG_AMAX",
                        {**quant_nvfp4.CONFIG["REG_AMAX"], "REVERSE": reverse})
    x = sample((384, 256), torch.bfloat16, spread=20, seed=3)   # 2 programs on CPU
    x[300, 200] = 1e4                                   # the maximum in the last row tile
    nf = {"check_finite": False}
    g = torch.Generator().manual_seed(3)
    rb_row = torch.randint(0, 256, (384, 256), dtype=torch.uint8, generator=g)
    rb_col = torch.randint(0, 256, (256, 384), dtype=torch.uint8, generator=g)
    sr, paths = {**nf, "stochastic": True}, []
    for row, col in [(("fp8_block", nf), ("fp8_block", nf)),
                     (("mxfp8_e4m3", nf), ("mxfp8_e4m3", nf)),
                     (("nvfp4", nf), ("nvfp4", {**nf, "rht": True})),
                     (("nvfp4", {**sr, "rand_bits": rb_row}),
                      ("nvfp4", {**sr, "rht": True, "rand_bits": rb_col}))]:
        k = ms.quantize_rowcol(x, row, col, backend="triton")
        paths.append(ms.explain()[("quantize_rowcol", f"{row[0]}|{col[0]}")])
        r = ms.quantize_rowcol(x, row, col, backend="reference")
        assert_same(k[0], r[0])
        assert_same(k[1], r[1])
    assert paths[-1].startswith("triton (NVFP4 pair split"), paths[-1]


@pytest.mark.parametrize("mode", ["reg", "sub"])
def test_fp8_1x128_scales_come_out_column_major(mode, monkeypatch):
    """Every FP8 1x128 view leaves the ops with scale strides (1, rows), cuBLASLt's layout: the
    register kernel writes it directly, the others are converted once; the fake (compile) tensor
    has the same strides; 128x128 weight scales stay row-major. The GEMM then copies nothing."""
    from microscale.kernels import gemm_fp8, quant_fp8
    from microscale.ops import _fake_view, col_major_like, view_spec
    monkeypatch.setitem(quant_fp8.CONFIG, "ROWCOL", mode)
    x = sample((256, 384), torch.bfloat16)
    view = ("fp8_block", {})
    for be in ("triton", "reference"):
        q_row, q_col = ms.quantize_rowcol(x, view, view, backend=be)
        assert q_row.scale.shape == (256, 3) and q_row.scale.stride() == (1, 256)
        assert q_col.scale.shape == (384, 2) and q_col.scale.stride() == (1, 384)
        assert ms.quantize(x, "fp8_block", backend=be).scale.stride() == (1, 256)
        w = ms.quantize(x, "fp8_block", block=(128, 128), backend=be)
        assert w.scale.is_contiguous()
        assert gemm_fp8._col_major(q_row.scale).data_ptr() == q_row.scale.data_ptr()
    spec = view_spec(ms.QFormat.FP8_BLOCK, {"block": (1, 128)})
    assert _fake_view(x, spec, 256, 384)[1].stride() == (1, 256)
    s = torch.arange(6.0).reshape(3, 2)
    assert torch.equal(col_major_like(s), s) and col_major_like(s).stride() == (1, 3)


@triton.jit
def _pow2_probe_kernel(v_ptr, s_ptr, i_ptr, n, E: tl.constexpr, IN_EXP: tl.constexpr):
    offs = tl.arange(0, 8192)
    v = tl.load(v_ptr + offs, mask=offs < n, other=0.0)
    s, inv = pow2_scale(v, E, IN_EXP)
    tl.store(s_ptr + offs, s, mask=offs < n)
    tl.store(i_ptr + offs, inv, mask=offs < n)


def _pow2_scale_probe():
    """Block maxima that meet every branch of ``pow2_scale``: zero, subnormals, the overflow
    edge of fp8_max / vmax, mantissas around 1.75, the top binade, Inf, and random values."""
    bits = [0, 1, 0x7FFFFF, 0x800000, 0x5FFFFF, 0x600000, 0x600001, 0x7F7FFFFF, 0x7F800000]
    for e in (*range(1, 10), 120, 126, 127, 128, 134, 135, 136, 141, 142, 143, 253, 254):
        bits += [(e << 23) | m for m in (0, 1, 0x5FFFFF, 0x600000, 0x600001, 0x7FFFFF)]
    g = torch.Generator().manual_seed(1)
    bits += torch.randint(0, 0x7F800000, (4000,), generator=g).tolist()
    return torch.tensor(bits, dtype=torch.int32).view(torch.float32)


@pytest.mark.parametrize("fp8_dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
@pytest.mark.parametrize("in_dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_fp8_pow2_scale_matches_the_division(fp8_dtype, in_dtype):
    """The division-free pow2 scale and its inverse = ``fp8_scale_from_amax`` (one IEEE
    division, floor log2, exp2) and ``1 / scale``, bit for bit, at every edge."""
    from microscale.kernels.quant_rowcol_reg import pow2_exponents
    from microscale.quant.fp8 import FP8_MAX, fp8_scale_from_amax

    vmax = _pow2_scale_probe()
    scale, inv = torch.empty_like(vmax), torch.empty_like(vmax)
    exp, in_exp = pow2_exponents(FP8_MAX[fp8_dtype], torch.finfo(in_dtype).max)
    _pow2_probe_kernel[(1,)](vmax, scale, inv, vmax.numel(), exp, in_exp)
    want = fp8_scale_from_amax(vmax, fp8_dtype, True, in_dtype)
    assert torch.equal(scale.view(torch.int32), want.view(torch.int32))
    assert torch.equal(inv.view(torch.int32), (1.0 / want).view(torch.int32))


def test_rowcol_kernel_choice_is_reported():
    """ms.explain() says which row + column kernel ran, and why not the register one."""
    x = sample((128, 256), torch.bfloat16)
    for opts, says in [({}, "tile in registers"), ({"pow2_scales": False}, "pow2 scales only")]:
        view = ("fp8_block", opts)
        ms.quantize_rowcol(x, view, view, backend="triton")
        assert says in ms.explain()[("quantize_rowcol", "fp8_block|fp8_block")]
    ms.quantize_rowcol(x, None, ("fp8_block", {}), backend="triton")      # no transposed copy
    assert "column view alone" in ms.explain()[("quantize_rowcol", "none|fp8_block")]
    ms.quantize_rowcol(x, ("mxfp8_e4m3", {}), ("mxfp8_e5m2", {}), backend="triton")
    assert "tile in registers" in ms.explain()[("quantize_rowcol", "mxfp8_e4m3|mxfp8_e5m2")]


def test_fp8_rowcol_mode_is_checked(monkeypatch):
    from microscale.kernels import quant_fp8
    monkeypatch.setitem(quant_fp8.CONFIG, "ROWCOL", "tiles")
    x = sample((128, 128), torch.bfloat16)
    with pytest.raises(ValueError, match="MICROSCALE_FP8_ROWCOL"):
        ms.quantize_rowcol(x, ("fp8_block", {}), ("fp8_block", {}), backend="triton")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mode", ["reg", "tile"])
def test_fp8_block_weight_rowcol_is_the_exact_transpose(mode, dtype, monkeypatch):
    """128x128 weights: both views in one pass (the register pair kernel with one scale a
    tile, or the older tile kernel); the column view is the row view transposed. NaN, ±Inf
    and an all-zero tile included."""
    from microscale.kernels import quant_fp8
    monkeypatch.setitem(quant_fp8.CONFIG, "W128", mode)
    x = sample((256, 384), dtype, spread=30)
    x[5, 7], x[130, 9], x[3, 200], x[250, 300] = float("nan"), -float("inf"), float("inf"), -1e30
    x[128:, 128:256] = 0.0
    view = ("fp8_block", {"block": (128, 128), "check_finite": False})
    k, r = both(lambda be: ms.quantize_rowcol(x, view, view, backend=be))
    assert_same(k[0], r[0])
    assert_same(k[1], r[1])
    t = k[0].t()
    assert torch.equal(_bytes(t.data), _bytes(k[1].data)) and torch.equal(t.scale, k[1].scale)


def test_fp8_weight_pair_mode_is_checked(monkeypatch):
    from microscale.kernels import quant_fp8
    monkeypatch.setitem(quant_fp8.CONFIG, "W128", "regs")
    view = ("fp8_block", {"block": (128, 128)})
    with pytest.raises(ValueError, match="W128"):
        ms.quantize_rowcol(sample((128, 128), torch.float32), view, view, backend="triton")


def test_nvfp4_2d_column_view_is_the_exact_transpose():
    """16x16 weights: the column view (dgrad's Wᵀ) equals the row view's transpose, SPEC §3."""
    x = sample((48, 80), torch.float32, seed=2)
    view = ("nvfp4", {"block_2d": True})
    k, r = both(lambda be: ms.quantize_rowcol(x, view, view, backend=be))
    assert_same(k[0], r[0])
    assert_same(k[1], r[1])
    t = k[0].t()
    assert torch.equal(t.data, k[1].data) and torch.equal(_bytes(t.scale), _bytes(k[1].scale))


# --------------------------------------------------------------------------- FP8 tensorwise
@pytest.mark.parametrize("shape,dtype", [((16, 32), torch.bfloat16), ((2, 24, 80), torch.float16),
                                         ((70, 48), torch.float32)])
@pytest.mark.parametrize("opts", [{}, {"fp8_dtype": torch.float8_e5m2}, {"pow2_scales": True},
                                  {"scale": torch.tensor(37.5)}],
                         ids=["e4m3", "e5m2", "pow2", "delayed"])
def test_fp8_tensor_exact(shape, dtype, opts):
    x = sample(shape, dtype, spread=12)
    assert_same(*both(lambda be: ms.quantize(x, "fp8_tensor", backend=be, **opts)))


def test_fp8_tensor_given_amax_is_current_scaling_from_it():
    """``amax=`` (agreed over ranks, or taken in a compiled graph): the kernel skips its amax
    pass and derives the scales by its own rule, the reference alike; the measured amax given
    back gives the current-scaling bits; scale and amax together are refused."""
    x = sample((256, 384), torch.bfloat16, spread=10)
    x[3, 4] = float("nan")
    plain = both(lambda be: ms.quantize_rowcol(x, ("fp8_tensor", {"check_finite": False}),
                                               ("fp8_tensor", {"check_finite": False}),
                                               backend=be))
    for amax in (plain[1][0].amax, torch.tensor(3.0), torch.tensor(0.0),
                 torch.tensor(float("inf"))):
        view = ("fp8_tensor", {"amax": amax, "check_finite": False, "pow2_scales": True})
        k, r = both(lambda be: ms.quantize_rowcol(x, view, view, backend=be))
        for a, b in zip(k, r):
            assert_same(a, b)
            assert torch.equal(a.amax, amax.float())
    same = ("fp8_tensor", {"amax": plain[1][0].amax, "check_finite": False})
    k = ms.quantize_rowcol(x, same, same, backend="triton")
    for a, b in zip(k, plain[0]):
        assert torch.equal(a.data.view(torch.uint8), b.data.view(torch.uint8))
        assert torch.equal(a.scale, b.scale)
    half = [("fp8_tensor", {"amax": torch.tensor(2.0), "check_finite": False}),
            ("fp8_tensor", {"check_finite": False})]          # one view measures its own amax
    with pytest.raises(ValueError, match="one view only"):     # the kernel refuses the mix
        ms.quantize_rowcol(x, *half, backend="triton")
    r = ms.quantize_rowcol(x, *half, backend="reference")       # (auto: the reference, warned)
    assert torch.equal(r[0].amax, torch.tensor(2.0)) and torch.equal(r[1].amax, plain[1][1].amax)
    bad = ("fp8_tensor", {"amax": torch.tensor(2.0), "scale": torch.tensor(1.0)})
    for be in ("triton", "reference"):
        with pytest.raises(ValueError, match="not both"):
            ms.quantize_rowcol(x, bad, None, backend=be)


def test_fp8_tensor_rowcol_exact_and_edges():
    """Both views in one call, each with its own (current or delayed) scale; amax = 0 and a
    subnormal amax (scale = inf -> the input dtype's max) as the reference has them."""
    x = sample((48, 96), torch.bfloat16, spread=20)
    e4, e5 = torch.float8_e4m3fn, torch.float8_e5m2
    for row, col in [(("fp8_tensor", {"fp8_dtype": e4}), ("fp8_tensor", {"fp8_dtype": e4})),
                     (("fp8_tensor", {"fp8_dtype": e5, "scale": torch.tensor(2.0)}),
                      ("fp8_tensor", {"fp8_dtype": e5, "scale": torch.tensor(0.5)})),
                     (None, ("fp8_tensor", {"pow2_scales": True}))]:
        k, r = both(lambda be: ms.quantize_rowcol(x, row, col, backend=be))
        assert_same(k[0], r[0])
        assert_same(k[1], r[1])
    for x in (torch.zeros(16, 32), torch.full((16, 32), 1e-39)):
        assert_same(*both(lambda be: ms.quantize(x, "fp8_tensor", backend=be)))


# --------------------------------------------------------------------------- refusals, errors
def test_kernels_refuse_what_they_cannot_do():
    from microscale.kernels import quant_fp8, quant_nvfp4
    x = sample((32, 64), torch.bfloat16)
    with pytest.raises(KernelUnsupported, match="contiguous"):
        quant_nvfp4.quantize_nvfp4_triton(x.t())
    with pytest.raises(KernelUnsupported, match="rht_d"):
        quant_nvfp4.quantize_nvfp4_triton(x, rht=True, rht_d=32)
    with pytest.raises(KernelUnsupported, match="block"):
        quant_fp8.quantize_fp8_block_triton(x, block=(1, 64))
    with pytest.raises(ValueError, match="cannot run"):   # backend="triton" re-raises clearly
        ms.quantize(x.t(), "nvfp4", backend="triton")
    # "auto" on a CUDA tensor falls back; on CPU auto is the reference: same result either way
    assert_same(ms.quantize(x.t(), "nvfp4"), ms.quantize(x.t(), "nvfp4", backend="reference"))


def test_bad_input_errors_match_reference():
    x = sample((16, 40), torch.bfloat16)          # 40 is not a multiple of 16 (nor 32)
    for fmt in ("nvfp4", "mxfp8_e4m3", "fp8_block"):
        with pytest.raises(ValueError, match="not divisible"):
            ms.quantize(x, fmt, backend="triton")
    bad = sample((16, 32), torch.float32)
    bad[3, 3] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        ms.quantize(bad, "nvfp4", backend="triton")


# --------------------------------------------------------------------------- GPU, larger
GPU_CASES = [
    ("nvfp4", {}), ("nvfp4", {"rht": True}), ("nvfp4", {"block_2d": True}),
    ("mxfp8_e4m3", {}), ("mxfp8_e5m2", {"scale_rounding": "floor"}), ("mxfp4", {}),
    ("fp8_block", {}), ("fp8_block", {"block": (128, 128)}), ("fp8_block", {"pow2_scales": False}),
    ("fp8_tensor", {}), ("fp8_tensor", {"fp8_dtype": torch.float8_e5m2}),
]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1024, 2048), (3, 640, 512), (4096, 1024)])
@pytest.mark.parametrize("fmt,opts", GPU_CASES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32],
                         ids=["bf16", "fp16", "fp32"])
def test_gpu_quantize_exact(shape, fmt, opts, dtype):
    rht = bool(opts.get("rht"))
    x = sample(shape, dtype, spread=0 if fmt == "nvfp4" or rht else 20, exact=rht)
    q_k = ms.quantize(x.cuda(), fmt, backend="triton", **opts)
    assert_same(q_k, ms.quantize(x, fmt, backend="reference", **opts))


@pytest.mark.gpu
def test_gpu_nvfp4_rht_randn_nearly_always_exact():
    """On N(0,1) bf16 data a few chunk sums are inexact; the codes still agree almost always."""
    x = sample((4096, 2048), torch.bfloat16)
    k = ms.quantize(x.cuda(), "nvfp4", backend="triton", rht=True)
    r = ms.quantize(x, "nvfp4", backend="reference", rht=True)
    assert torch.equal(k.amax.cpu(), r.amax)
    assert (k.data.cpu() != r.data).float().mean() < 1e-4


@pytest.mark.gpu
def test_gpu_mxfp4_rht32_close():
    """Tensor-core d = 32 rotations: bit for bit on exact-sum data, both views; close on
    random data."""
    x = sample((2048, 1024), torch.bfloat16)
    assert_mx_rht32_close(ms.quantize(x.cuda(), "mxfp4", backend="triton", rht=True),
                          ms.quantize(x, "mxfp4", backend="reference", rht=True))
    x = sample((2048, 1024), torch.bfloat16, exact=True)
    views = (("mxfp4", {"rht": True}), ("mxfp4", {"rht": True}))
    k = ms.quantize_rowcol(x.cuda(), *views, backend="triton")
    r = ms.quantize_rowcol(x, *views, backend="reference")
    for q_k, q_r in zip(k, r):
        assert_same(q_k, q_r)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["tile", "sub", "sub-bytes"])
def test_gpu_fp8_rowcol_kernels_exact(mode, monkeypatch):
    """Both FP8 1x128 row+column kernels on the GPU, at a training shape, bit for bit (the
    sub-tiled one with packed-word and with byte column stores)."""
    from microscale.kernels import quant_fp8
    monkeypatch.setitem(quant_fp8.CONFIG, "ROWCOL", mode.split("-")[0])
    monkeypatch.setitem(quant_fp8.CONFIG, "PACK_COL", mode != "sub-bytes")
    _gpu_both_views_exact(("fp8_block", {}))


@pytest.mark.gpu
@pytest.mark.parametrize("which", ["row", "column"])
def test_gpu_fp8_view_alone_exact(which):
    """A single FP8 1x128 view through the register kernel with the other view's stores off,
    at a training shape: the row view alone (fprop's x when backward recomputes xᵀ) or the
    column view alone (the recomputed wgrad input, ``nn.recompute``): the reference's bits."""
    x = sample((4096, 768), torch.bfloat16, spread=30)
    views = (("fp8_block", {}), None) if which == "row" else (None, ("fp8_block", {}))
    k = ms.quantize_rowcol(x.cuda(), *views, backend="triton")
    key = "fp8_block|none" if which == "row" else "none|fp8_block"
    assert f"{which} view alone" in ms.explain()[("quantize_rowcol", key)]
    r = ms.quantize_rowcol(x, *views, backend="reference")
    assert_same(k[0], r[0])
    assert_same(k[1], r[1])


def _gpu_both_views_exact(view):
    """Row + column views of ``view`` at a training shape: kernel on the GPU = reference."""
    x = sample((4096, 768), torch.bfloat16, spread=30)
    k = ms.quantize_rowcol(x.cuda(), view, view, backend="triton")
    r = ms.quantize_rowcol(x, view, view, backend="reference")
    assert_same(k[0], r[0])
    assert_same(k[1], r[1])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_gpu_rowcol_exact(dtype):
    x = sample((2048, 1536), dtype, exact=True)
    rows, cols = x.shape
    rb_r = torch.randint(0, 256, (rows, cols), dtype=torch.uint8)
    rb_c = torch.randint(0, 256, (cols, rows), dtype=torch.uint8)
    cases = [
        (("nvfp4", {}), ("nvfp4", {"rht": True})),
        (("nvfp4", {"stochastic": True, "rand_bits": rb_r}),
         ("nvfp4", {"rht": True, "stochastic": True, "rand_bits": rb_c})),
        (("mxfp8_e4m3", {}), ("mxfp8_e4m3", {})),
        (("mxfp4", {}), ("mxfp4", {"stochastic": True, "rand_bits": rb_c})),
        (("mxfp4", {"stochastic": True, "rand_bits": rb_r}), None),
        (("mxfp8_e5m2", {"scale_rounding": "floor"}), None),
        (("fp8_block", {}), ("fp8_block", {})),
        (("fp8_block", {"block": (128, 128)}), ("fp8_block", {"block": (128, 128)})),
        (("nvfp4", {"block_2d": True}), ("nvfp4", {"block_2d": True})),
        (("fp8_tensor", {}), ("fp8_tensor", {})),
        (("fp8_tensor", {"fp8_dtype": torch.float8_e5m2}), None),
    ]
    for row, col in cases:
        dev = [(v[0], {k: (t.cuda() if isinstance(t, torch.Tensor) else t)
                       for k, t in v[1].items()}) if v else None for v in (row, col)]
        k = ms.quantize_rowcol(x.cuda(), dev[0], dev[1], backend="triton")
        r = ms.quantize_rowcol(x, row, col, backend="reference")
        assert_same(k[0], r[0])
        assert_same(k[1], r[1])


@pytest.mark.gpu
@pytest.mark.parametrize("nan_sel", [True, False], ids=["nan_sel", "nan_native"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_fp8_weight_pair_reg_exact(dtype, nan_sel, monkeypatch):
    """A weight's 128x128 W + Wᵀ pair from the register pair kernel (TILE) on the GPU, bit
    for bit, with ±NaN and ±Inf (fp32 masters as the layers pass them)."""
    from microscale.kernels import quant_fp8
    monkeypatch.setitem(quant_fp8.CONFIG, "W128", "reg")
    monkeypatch.setitem(quant_fp8.CONFIG, "NAN_SEL", nan_sel)
    x = sample((2048, 1536), dtype, spread=30)
    x[5, 7], x[70, 9], x[300, 2], x[900, 1000] = float("nan"), -float("nan"), float("inf"), \
        -float("inf")
    view = ("fp8_block", {"block": (128, 128), "check_finite": False})
    k = ms.quantize_rowcol(x.cuda(), view, view, backend="triton")
    r = ms.quantize_rowcol(x, view, view, backend="reference")
    assert_same(k[0], r[0])
    assert_same(k[1], r[1])


@pytest.mark.gpu
@pytest.mark.parametrize("pack", [False, True])
def test_gpu_mxfp8_rowcol_packed_column_exact(pack, monkeypatch):
    """The MXFP8 column view with byte or packed-word stores, on the GPU, bit for bit."""
    from microscale.kernels import quant_mx
    monkeypatch.setitem(quant_mx.CONFIG, "PACK_COL", pack)
    _gpu_both_views_exact(("mxfp8_e4m3", {}))


@pytest.mark.gpu
@pytest.mark.parametrize("nan_sel", [True, False], ids=["nan_sel", "nan_native"])
@pytest.mark.parametrize("which", ["fp8_block", "mxfp8"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_gpu_rowcol_reg_exact(which, nan_sel, dtype, monkeypatch):
    """The register-resident row + column kernels on the GPU, bit for bit, with +-NaN and
    +-Inf: with ``NAN_SEL`` off the NaN byte is whatever the hardware conversion makes of a
    NaN times a scale, which must be 0x7F for either sign."""
    from microscale.kernels import quant_fp8, quant_mx
    cfg = quant_fp8.CONFIG if which == "fp8_block" else quant_mx.CONFIG
    monkeypatch.setitem(cfg, "ROWCOL", "reg")
    monkeypatch.setitem(cfg, "NAN_SEL", nan_sel)
    x = sample((4096, 768), dtype, spread=30 if dtype == torch.bfloat16 else 8)
    x[5, 7], x[70, 9], x[3, 2], x[9, 100] = float("nan"), -float("nan"), float("inf"), -float("inf")
    nf = {"check_finite": False}
    pairs = [(("fp8_block", nf), ("fp8_block", nf)),
             (("fp8_block", {**nf, "fp8_dtype": torch.float8_e5m2}),) * 2] if which == "fp8_block" \
        else [(("mxfp8_e4m3", nf), ("mxfp8_e4m3", nf)),
              (("mxfp8_e5m2", nf), ("mxfp8_e4m3", {**nf, "scale_rounding": "floor"}))]
    for row, col in pairs:
        k = ms.quantize_rowcol(x.cuda(), row, col, backend="triton")
        r = ms.quantize_rowcol(x, row, col, backend="reference")
        assert_same(k[0], r[0])
        assert_same(k[1], r[1])


_REG_LOOPS = [("fp8_block", {"NUM_STAGES_reg": s}) for s in (1, 2, 3)] + \
    [("mxfp8", {"NUM_STAGES_reg": s}) for s in (1, 2, 3)] + \
    [("mxfp8", {"BC_reg": 64, "num_warps_reg": w, "PROGS_PER_SM_reg": 12}) for w in (1, 2)]


@pytest.mark.gpu
@pytest.mark.parametrize("which,knobs", _REG_LOOPS,
                         ids=[f"{w}-" + "-".join(f"{k}{v}" for k, v in c.items())
                              for w, c in _REG_LOOPS])
def test_gpu_rowcol_reg_stages_exact(which, knobs, monkeypatch):
    """The register pair kernels with their tile loop software-pipelined (``NUM_STAGES_reg``
    > 1: the next tile's loads go through shared memory as cp.async), and the MXFP8 one on
    [32, 64] tiles, bit for bit with the reference, ±NaN and ±Inf included, over more tiles
    than programs (the loop runs); MXFP8's views written expanded against its codes."""
    from microscale.kernels import quant_fp8, quant_mx
    from microscale.ops import quantize_views
    from microscale.tensor import QFormat
    cfg = quant_fp8.CONFIG if which == "fp8_block" else quant_mx.CONFIG
    for key, value in knobs.items():
        monkeypatch.setitem(cfg, key, value)
    x = sample((8192, 1280), torch.bfloat16, spread=30)
    x[5, 7], x[70, 9], x[3, 2], x[8191, 1279] = float("nan"), -float("nan"), float("inf"), \
        -float("inf")
    nf = {"check_finite": False}
    fmt = "fp8_block" if which == "fp8_block" else "mxfp8_e4m3"
    k = ms.quantize_rowcol(x.cuda(), (fmt, nf), (fmt, nf), backend="triton")
    r = ms.quantize_rowcol(x, (fmt, nf), (fmt, nf), backend="reference")
    assert_same(k[0], r[0])
    assert_same(k[1], r[1])
    if which == "mxfp8":
        e4 = QFormat.MXFP8_E4M3
        got = quantize_views(x.cuda(), (e4, {**nf, "expand": True}),
                             (e4, {**nf, "expand": True}), "triton")
        for q, q0 in zip(got, k):
            assert_expanded_is_codes(q, q0)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(4096, 768), (1008, 80)])
def test_gpu_nvfp4_rne_column_view_exact(shape):
    """A round-to-nearest NVFP4 column view alone (``REG_COL["RNE"]``'s tile: the x pairs'
    RHT'd column view, and a split x pair's first launch) on the GPU, with and without the
    RHT, bit for bit with the reference: NaN, Inf, a huge value, a partial tile."""
    x = sample(shape, torch.bfloat16, exact=True, seed=5)
    x[5, 7], x[70, 9], x[3, 2], x[9, 60] = float("nan"), -float("nan"), float("inf"), -3e38
    nf = {"check_finite": False}
    for row, col in [(None, ("nvfp4", {**nf, "rht": True})), (None, ("nvfp4", nf)),
                     (("nvfp4", nf), ("nvfp4", {**nf, "rht": True}))]:
        k = ms.quantize_rowcol(x.cuda(), row, col, backend="triton")
        r = ms.quantize_rowcol(x, row, col, backend="reference")
        assert_same(k[0], r[0])
        assert_same(k[1], r[1])


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(16384, 768), (4096, 3072), (1008, 80)])
def test_gpu_nvfp4_reg_pass_matches(shape, monkeypatch):
    """The reg pass on the GPU at training shapes (and a partial tile): bit for bit with the
    reference (caller bits) and with the rows pass (in-kernel Philox), NaN and Inf included.
    Both views in one launch (``SPLIT`` off: pairs at most 1024 wide split by default, and
    the split launches have tests of their own)."""
    from microscale.kernels import quant_nvfp4
    monkeypatch.setitem(quant_nvfp4.CONFIG, "REG", {**quant_nvfp4.CONFIG["REG"], "ROW_SR": True})
    monkeypatch.setitem(quant_nvfp4.CONFIG, "SPLIT", False)
    x = sample(shape, torch.bfloat16, exact=True, seed=2)
    x[5, 7], x[70, 9], x[3, 2], x[9, 60] = float("nan"), -float("nan"), float("inf"), -3e38
    rows, cols = x.shape
    nf = {"check_finite": False}
    rb_r = torch.randint(0, 256, (rows, cols), dtype=torch.uint8)
    rb_c = torch.randint(0, 256, (cols, rows), dtype=torch.uint8)
    pair = (("nvfp4", {**nf, "stochastic": True, "rand_bits": rb_r}),
            ("nvfp4", {**nf, "rht": True, "stochastic": True, "rand_bits": rb_c}))
    dev = [(f, {k: (t.cuda() if isinstance(t, torch.Tensor) else t) for k, t in o.items()})
           for f, o in pair]
    k = ms.quantize_rowcol(x.cuda(), *dev, backend="triton")
    assert ms.explain()[("quantize_rowcol", "nvfp4|nvfp4")].startswith("triton (NVFP4 reg")
    r = ms.quantize_rowcol(x, *pair, backend="reference")
    assert_same(k[0], r[0])
    assert_same(k[1], r[1])
    outs = []
    for pass_ in ("reg", "rows"):
        monkeypatch.setitem(quant_nvfp4.CONFIG, "PASS", pass_)
        for views in [(("nvfp4", nf), ("nvfp4", {**nf, "rht": True})),
                      (("nvfp4", {**nf, "stochastic": True}),
                       ("nvfp4", {**nf, "rht": True, "stochastic": True}))]:
            torch.manual_seed(11)
            outs.append(ms.quantize_rowcol(x.cuda(), *views, backend="triton"))
    for a, b in zip(outs[:2], outs[2:]):
        assert_same(a[0], b[0])
        assert_same(a[1], b[1])


@pytest.mark.gpu
def test_gpu_nvfp4_amax_pass_skips_nan():
    """The reg amax pass with NaN in x and no Inf (so a NaN taken as a maximum would show):
    both views' amaxes and codes bit for bit with the reference."""
    x = sample((4096, 768), torch.bfloat16, exact=True, seed=4)
    x[5, 7], x[70, 9], x[4000, 700] = float("nan"), -float("nan"), float("nan")
    x[1000:1016, 16] = float("nan")                     # a whole column block
    nf = {"check_finite": False}
    views = (("nvfp4", nf), ("nvfp4", {**nf, "rht": True}))
    k = ms.quantize_rowcol(x.cuda(), *views, backend="triton")
    r = ms.quantize_rowcol(x, *views, backend="reference")
    assert torch.isfinite(k[0].amax).item() and torch.isfinite(k[1].amax).item()
    assert_same(k[0], r[0])
    assert_same(k[1], r[1])


@pytest.mark.gpu
def test_gpu_sr_seeded():
    x = sample((1024, 1024), torch.bfloat16).cuda()
    torch.manual_seed(3)
    a = ms.quantize_rowcol(x, ("nvfp4", {"stochastic": True}),
                           ("nvfp4", {"rht": True, "stochastic": True}))
    torch.manual_seed(3)
    b = ms.quantize_rowcol(x, ("nvfp4", {"stochastic": True}),
                           ("nvfp4", {"rht": True, "stochastic": True}))
    assert torch.equal(a[0].data, b[0].data) and torch.equal(a[1].data, b[1].data)
    mean = sum(ms.quantize(x, "nvfp4", stochastic=True).dequantize() for _ in range(64)) / 64
    rne_err = (ms.quantize(x, "nvfp4").dequantize() - x.float()).abs().mean()
    assert (mean - x.float()).abs().mean() < 0.4 * rne_err


@pytest.mark.parametrize("row,col", [
    (("nvfp4", {"stochastic": True}), ("nvfp4", {"rht": True, "stochastic": True})),
    (("nvfp4", {"block_2d": True}), ("nvfp4", {"block_2d": True})),
    (("nvfp4", {"rht": True}), ("nvfp4", {})), (None, ("nvfp4", {"stochastic": True}))],
    ids=["dy_sr_rht", "weight_2d", "row_rht", "col_sr"])
def test_nvfp4_passes_agree_bit_for_bit(row, col, monkeypatch):
    """The quantize passes ("v3", "rows" and "reg", quant_nvfp4.CONFIG['PASS']) give the same
    bytes, in-kernel Philox streams included (reg: on a partial and on whole tiles)."""
    from microscale.kernels import quant_nvfp4
    for shape in ((96, 160), (256, 128)):
        x = sample(shape, torch.bfloat16, exact=True, seed=9)
        outs = []
        for pass_ in ("v3", "rows", "reg", "reg-sr"):
            monkeypatch.setitem(quant_nvfp4.CONFIG, "PASS", pass_.split("-")[0])
            monkeypatch.setitem(quant_nvfp4.CONFIG, "REG", {**quant_nvfp4.CONFIG["REG"],
                                                            "ROW_SR": pass_ == "reg-sr"})
            torch.manual_seed(5)
            outs.append(ms.quantize_rowcol(x, row, col, backend="triton"))
        for views in zip(*outs):
            for other in views[1:]:
                assert_same(other, views[0])
    monkeypatch.setitem(quant_nvfp4.CONFIG, "PASS", "typo")
    with pytest.raises(ValueError, match="PASS"):
        ms.quantize_rowcol(x, row, col, backend="triton")


def test_nvfp4_amax_partials_same_bits_own_outputs(monkeypatch, gpu_tiles):
    """``quant_nvfp4.CONFIG['AMAX_PARTIALS']``: the reg amax pass leaves per-program maxima that
    the quantize launches reduce (one launch and the split pair's two, a view alone): the same
    views and amaxes as the zeroed buffer with atomics, the reference's amaxes, and each view's
    amax in its own storage (no copy needed for the op's outputs); NaN skipped."""
    from microscale.kernels import quant_nvfp4
    from microscale.ops import quantize_views
    gpu_tiles("quant_nvfp4", "REG_AMAX")                       # the amax pass's [256, 32]
    g = torch.Generator().manual_seed(8)
    x = (torch.randn(512, 48, generator=g) * 3).bfloat16()     # 4 amax tiles, 2 programs
    x[300, 7] = float("nan")
    nv = {"check_finite": False}
    sr = {**nv, "stochastic": True, "seed": torch.tensor([5])}
    Q = ms.QFormat
    cases = [((Q.NVFP4, nv), (Q.NVFP4, {**nv, "rht": True})),                  # x pair
             ((Q.NVFP4, sr), (Q.NVFP4, {**sr, "rht": True})),                  # dy pair, split
             (None, (Q.NVFP4, {**nv, "rht": True})), ((Q.NVFP4, nv), None)]     # one view
    for row, col in cases:
        outs = []
        for on in (True, False):
            monkeypatch.setitem(quant_nvfp4.CONFIG, "AMAX_PARTIALS", on)
            outs.append(quantize_views(x, row, col, "triton"))
        ref = quantize_views(x, row, col, "reference")
        for q, w, r in zip(*outs, ref):
            if q is None:
                continue
            assert torch.equal(q.data.view(torch.uint8), w.data.view(torch.uint8))
            assert torch.equal(q.scale.view(torch.uint8), w.scale.view(torch.uint8))
            assert torch.equal(q.amax, w.amax) and torch.equal(q.amax, r.amax)
        if row and col:
            ptrs = {q.amax.untyped_storage().data_ptr() for q in outs[0]}
            assert len(ptrs) == 2


@pytest.mark.parametrize("big", [False, True], ids=["plain", "huge_and_inf"])
@pytest.mark.parametrize("device,shape", [("cpu", (512, 48)),
                                          pytest.param("cuda", (8192, 768), marks=pytest.mark.gpu)])
def test_nvfp4_amax_unclamped_same_bits(big, device, shape, monkeypatch, gpu_tiles):
    """``quant_nvfp4.CONFIG['AMAX_UNCLAMPED']``: the reg amax pass rotates without the RHT's
    input clamp and checks max|x| per program. Every view and amax equals the clamped pass's
    and the reference's: with ordinary values (a NaN too), and where one program's tiles hold
    16-row chunks whose unclamped rotation would overflow (3e38 in one, Inf in another),
    which that program reruns with the clamp (the other program does not need to). Both with
    the RHT's last stage as pair maxima (``REG_AMAX['PAIRS']``, on by default) and without."""
    from microscale.kernels import quant_nvfp4
    from microscale.ops import quantize_views
    gpu_tiles("quant_nvfp4", "REG_AMAX")                       # the amax pass's [256, 32]
    # CPU: 4 amax tiles, 2 programs; the huge chunks lie in one tile: one program reruns
    x, nv, sr = _huge_chunk_input(shape, 12, big, device)
    Q = ms.QFormat
    cases = [((Q.NVFP4, nv), (Q.NVFP4, {**nv, "rht": True})),                  # x pair
             ((Q.NVFP4, sr), (Q.NVFP4, {**sr, "rht": True})),                  # dy pair, split
             (None, (Q.NVFP4, {**nv, "rht": True}))]                            # column alone
    for row, col in cases:
        ref = quantize_views(x, row, col, "reference")
        outs = []
        for unclamped, partials, pairs in ((False, True, False), (False, True, True),
                                           (True, True, True), (True, False, True),
                                           (True, True, False)):
            monkeypatch.setitem(quant_nvfp4.CONFIG, "AMAX_UNCLAMPED", unclamped)
            monkeypatch.setitem(quant_nvfp4.CONFIG, "AMAX_PARTIALS", partials)
            monkeypatch.setitem(quant_nvfp4.CONFIG, "REG_AMAX",
                                {**quant_nvfp4.CONFIG["REG_AMAX"], "PAIRS": pairs})
            outs.append(quantize_views(x, row, col, "triton"))
        for *views, r in zip(*outs, ref):
            if r is None:
                continue
            want = views[0] if "seed" in (row or col)[1] else r         # SR: the kernels' stream
            for q in views:
                assert torch.equal(q.data.view(torch.uint8), want.data.view(torch.uint8))
                assert torch.equal(q.scale.view(torch.uint8), want.scale.view(torch.uint8))
                assert torch.equal(q.amax, r.amax)
        if big:
            assert torch.isfinite(ref[1].amax) and ref[1].amax > 1e37


@pytest.mark.parametrize("big", [False, True], ids=["plain", "huge_and_inf"])
@pytest.mark.parametrize("device,shape", [("cpu", (512, 48)),
                                          pytest.param("cuda", (8192, 768), marks=pytest.mark.gpu)])
def test_nvfp4_col_view_unclamped_same_bits(big, device, shape, monkeypatch, gpu_tiles):
    """``quant_nvfp4.CONFIG['COL_UNCLAMPED']``: a split pair's column view (the RHT, alone in
    its launch) rotates without the RHT's input clamp where the amax pass's max|x| is at most
    2^125. Every view and amax equals the clamped launch's, and the reference's where there
    is no SR: ordinary values with a NaN (the unclamped tiles), and 16-row chunks of 3e38 and
    Inf (whose unclamped rotation overflows: the launch must take the clamped tiles), with
    the column view as codes and expanded, and the next tile prefetched or not."""
    from microscale.kernels import quant_nvfp4
    from microscale.ops import quantize_views
    if "MICROSCALE_NVFP4_COL_UNCLAMPED" not in os.environ:     # on by default (session 54)
        assert quant_nvfp4.CONFIG["COL_UNCLAMPED"]
    gpu_tiles("quant_nvfp4", "REG_COL", "REG_ROW", "REG_AMAX")
    x, nv, sr = _huge_chunk_input(shape, 13, big, device)
    Q = ms.QFormat
    cases = [((Q.NVFP4, sr), (Q.NVFP4, {**sr, "rht": True})),                  # dy pair
             ((Q.NVFP4, {**sr, "expand": True}),                               # as a layer asks
              (Q.NVFP4, {**sr, "rht": True, "expand": True})),
             ((Q.NVFP4, {**nv, "expand": True}),                               # nvfp4_no_sr's dy
              (Q.NVFP4, {**nv, "rht": True, "expand": True})),
             ((Q.NVFP4, nv), (Q.NVFP4, {**nv, "rht": True}))]                  # a narrow x pair
    for row, col in cases:
        ref = quantize_views(x, row, col, "reference")
        outs = []
        for unclamped, prefetch in ((False, True), (True, True), (True, False)):
            monkeypatch.setitem(quant_nvfp4.CONFIG, "COL_UNCLAMPED", unclamped)
            monkeypatch.setitem(quant_nvfp4.CONFIG, "REG_COL",
                                {**quant_nvfp4.CONFIG["REG_COL"], "PREFETCH": prefetch})
            outs.append(quantize_views(x, row, col, "triton"))
        for *views, r in zip(*outs, ref):
            want = views[0] if "seed" in row[1] else r                  # SR: the kernels' stream
            for q in views:
                assert same_values(q.data, want.data)
                assert torch.equal(q.scale.view(torch.uint8), want.scale.view(torch.uint8))
                assert torch.equal(q.amax, r.amax)
        if big:
            assert torch.isfinite(ref[1].amax) and ref[1].amax > 1e37


def _huge_chunk_input(shape, seed: int, big: bool, device):
    """``(x, nv, sr)``: bf16 normal values with a NaN, and with ``big`` 16-row chunks of 3e38
    and Inf (whose unclamped rotation overflows); the non-finite-allowed options, and those
    with SR and a seed on ``device``."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(*shape, generator=g) * 3).bfloat16()
    x[300, 7] = float("nan")
    if big:
        x[16:32, 5] = 3.0e38
        x[48:64, 9] = float("inf")
    nv = {"check_finite": False}
    return x.to(device), nv, {**nv, "stochastic": True, "seed": torch.tensor([5], device=device)}


@pytest.mark.parametrize("backend", ["reference", "triton"])
@pytest.mark.parametrize("row,col", [("mxfp8_e4m3", "mxfp8_e4m3"), ("mxfp8_e5m2", "mxfp8_e4m3"),
                                     ("mxfp4", "mxfp4"), ("fp8_block", "fp8_block")])
def test_pair_shares_its_amax(row, col, backend, monkeypatch):
    """``ops.CONFIG["SHARE_COL_AMAX"]``: an MX or FP8 blockwise pair returns its amax once (an
    empty column slot, the fake's too) and both views carry it: the same value as each view's
    reference amax and as the pair without sharing, NaN-free and with a NaN in x."""
    from microscale import ops
    x = sample((256, 384), torch.bfloat16, spread=20, seed=3)
    nf = {"check_finite": False}
    views = ((ms.QFormat(row), nf), (ms.QFormat(col), nf))
    specs = [ops.view_spec(*v) for v in views]
    torch.library.opcheck(torch.ops.microscale.quantize_rowcol.default,
                          (x, *specs, backend, None, None, None, None, None, None, None),
                          test_utils=("test_faketensor",))
    raw = torch.ops.microscale.quantize_rowcol(x, *specs, backend, *[None] * 7)
    assert raw[5].numel() == 0 and raw[2].dim() == 0
    for bad in (False, True):
        if bad:
            x[7, 9] = float("nan")
        shared = ops.quantize_views(x, *views, backend)
        monkeypatch.setitem(ops.CONFIG, "SHARE_COL_AMAX", False)
        own = ops.quantize_views(x, *views, backend)
        monkeypatch.setitem(ops.CONFIG, "SHARE_COL_AMAX", True)
        ref = ops.quantize_views(x, *views, "reference")
        assert shared[1].amax is shared[0].amax
        for q in (*own, *ref):
            assert torch.equal(shared[0].amax, q.amax) or (bad and q.amax.isnan() and
                                                           shared[0].amax.isnan())
