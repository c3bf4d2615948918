"""The NVFP4 row kernel (``kernels/quant_nvfp4_row.py``: a row view alone, a whole 16-element
block in one thread) against the reference and against the reg pass's row view it replaces;
with the RHT (rotated in-thread) against the reference.

Bit for bit: codes (RNE, SR from caller bytes) and scale bytes against ``quant.quantize_nvfp4``;
the expanded view (``tensor.py``) against the reference's codes decoded, with NaN kept in the
block maxima and with the per-element select (``CONFIG["EXP_NAN_MAX"]``); in-kernel Philox
(no reference twin) against the reg pass with the same seed; a split pair with a prologue
against the same pair with the row kernel off. NaN, Inf, a huge value, fp16, row counts and
widths that leave partial tiles. CPU tests run in Triton's interpreter; ``gpu`` ones compiled.
"""

from __future__ import annotations

import pytest
import torch

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

import microscale as ms  # noqa: E402
from microscale.kernels._philox import philox4x32  # noqa: E402
from microscale.ops import quantize_views  # noqa: E402
from microscale.tensor import QFormat  # noqa: E402

N = QFormat.NVFP4
NF = {"check_finite": False}


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-equal (codes as bytes, values as fp32 bits), any two NaNs equal."""
    if a.dtype in (torch.uint8, torch.int32):
        return torch.equal(a.cpu(), b.cpu())
    a, b = a.float().cpu(), b.float().cpu()
    return torch.equal(torch.isnan(a), torch.isnan(b)) and \
        torch.equal(a.nan_to_num(7.0).view(torch.int32), b.nan_to_num(7.0).view(torch.int32))


def _x(shape, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g) * torch.logspace(-3, 3, shape[1])
    x = x.to(dtype)
    x[3, 5], x[7, 9], x[1, 2] = float("nan"), float("inf"), -3e38 if dtype == torch.bfloat16 \
        else -6e4
    x[0, 1], x[2, 20] = -0.0, -1e-30            # sign-only codes (8): -0, and one that rounds to -0
    if dtype == torch.bfloat16:                 # past the RHT's input clamp 2^125; subnormals
        x[4, 17], x[5, 33], x[6, 34] = 5e37, 3e-39, -1e-40
    return x


@pytest.fixture
def row1(monkeypatch):
    """The row kernel on for both output forms; the fixture's value turns it off (or on)."""
    from microscale.kernels import quant_nvfp4

    def switch(on: bool):
        monkeypatch.setitem(quant_nvfp4.CONFIG, "ROW1",
                            {**quant_nvfp4.CONFIG["ROW1"], "codes": on, "expanded": on})
    switch(True)
    return switch


def _check_against_reference(x, device, rht: bool = False):
    """Codes (RNE and from the caller's bytes), scales and amax against the reference, and the
    expanded view; with ``rht`` the row view's 16-point RHT, rotated in the row kernel (its
    expanded form keeps the rows pass, so that part is left out)."""
    g = torch.Generator().manual_seed(3)
    bits = torch.randint(0, 256, x.shape, dtype=torch.uint8, generator=g)
    base = {**NF, "rht": True} if rht else dict(NF)
    for opts in (base, {**base, "stochastic": True, "rand_bits": bits}):
        ref = ms.quantize(x, "nvfp4", backend="reference", **opts)
        dev = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in opts.items()}
        got = ms.quantize(x.to(device), "nvfp4", backend="triton", **dev)
        path = ms.explain()[("quantize", "nvfp4")]
        assert path.startswith("triton (NVFP4 row kernel") and (not rht or "rotated there" in path)
        assert _same(got.data.view(torch.uint8), ref.data.view(torch.uint8))
        assert _same(got.scale.view(torch.uint8), ref.scale.view(torch.uint8))
        assert _same(got.amax, ref.amax)
        if rht:
            continue
        exp = quantize_views(x.to(device), (N, {**dev, "expand": True}), None, "triton")[0]
        assert "row kernel" in ms.explain()[("quantize_rowcol", "nvfp4|none")]
        assert exp.expanded and _same(exp.data, ref.expand().data)
        assert _same(exp.scale.view(torch.uint8), ref.scale.view(torch.uint8))


@pytest.mark.parametrize("shape,dtype", [((64, 256), torch.bfloat16), ((37, 48), torch.bfloat16),
                                         ((20, 272), torch.float16)])
def test_row_kernel_matches_reference(shape, dtype, row1):
    """Codes, scales, amax and the expanded view against the reference (caller bytes for SR)."""
    _check_against_reference(_x(shape, dtype), "cpu")


@pytest.mark.parametrize("nan_max", [True, False])
def test_row_kernel_expanded_nan_paths(nan_max, row1, monkeypatch):
    """An expanded row view with NaN kept in the block maxima (EXP 1) or selected per element
    (EXP 2): the same values and scale bytes, NaN and Inf blocks included."""
    from microscale.kernels import quant_nvfp4
    monkeypatch.setitem(quant_nvfp4.CONFIG, "EXP_NAN_MAX", nan_max)
    x = _x((48, 80), seed=2)
    x[5, 40:44] = torch.tensor([float("nan"), -float("nan"), float("inf"), 0.0])
    ref = ms.quantize(x, "nvfp4", backend="reference", **NF)
    got = quantize_views(x, (N, {**NF, "expand": True}), None, "triton")[0]
    assert _same(got.data, ref.expand().data)
    assert _same(got.scale.view(torch.uint8), ref.scale.view(torch.uint8))


def _philox_pairs(x, device, row1):
    """In-kernel Philox (codes and expanded; alone and as a split dy pair's second launch)
    with the row kernel, then with the reg pass: the same bits."""
    seed = torch.tensor([9], device=device)
    sr = {**NF, "stochastic": True, "seed": seed}
    cases = [((N, {**sr, "expand": e}), None) for e in (False, True)]
    cases.append(((N, {**sr, "expand": True}), (N, {**sr, "rht": True, "expand": True})))
    for row, col in cases:
        row1(True)
        got = quantize_views(x.to(device), row, col, "triton")
        key = "nvfp4|nvfp4" if col else "nvfp4|none"
        assert "row kernel" in ms.explain()[("quantize_rowcol", key)]
        row1(False)
        want = quantize_views(x.to(device), row, col, "triton")
        assert "row kernel" not in ms.explain()[("quantize_rowcol", key)]
        for q, w in zip(got, want):
            if q is not None:
                assert _same(q.data.view(torch.uint8) if not q.expanded else q.data,
                             w.data.view(torch.uint8) if not w.expanded else w.data)
                assert _same(q.scale.view(torch.uint8), w.scale.view(torch.uint8))


def test_row_kernel_philox_equals_reg_pass(row1):
    _philox_pairs(_x((64, 96), seed=4), "cpu", row1)


def test_row_kernel_prologue_in_split_pair(row1):
    """A split dy pair whose views are of ``relu_square_grad(x, u)`` (the prologue applied as
    the tiles load): the row kernel's row view equals the reg pass's."""
    x, u = _x((32, 64), seed=5), _x((32, 64), seed=6)
    sr = {**NF, "stochastic": True, "seed": torch.tensor([4])}
    row, col = (N, {**sr, "expand": True}), (N, {**sr, "rht": True, "expand": True})
    got = quantize_views(x, row, col, "triton", prologue="relu_square_grad", x2=u)
    assert "row kernel" in ms.explain()[("quantize_rowcol", "nvfp4|nvfp4")]
    row1(False)
    want = quantize_views(x, row, col, "triton", prologue="relu_square_grad", x2=u)
    for q, w in zip(got, want):
        assert _same(q.data, w.data) and _same(q.scale.view(torch.uint8), w.scale.view(torch.uint8))


def test_row_kernel_leaves_fp32_and_philox_rht_to_other_passes(row1):
    """fp32 input, and a row view with the RHT rounded with in-kernel Philox or written
    expanded, keep their passes (the row kernel takes bf16 and fp16 1x16 blocks, with the RHT
    as codes from RNE or the caller's bytes), and say so."""
    ms.quantize(torch.randn(32, 64), "nvfp4", backend="triton")
    assert "row kernel" not in ms.explain()[("quantize", "nvfp4")]
    x = torch.randn(32, 64).bfloat16()
    ms.quantize(x, "nvfp4", backend="triton", rht=True, stochastic=True, seed=torch.tensor([3]))
    assert "row kernel" not in ms.explain()[("quantize", "nvfp4")]
    quantize_views(x, (N, {**NF, "rht": True, "expand": True}), None, "triton")
    assert "row kernel" not in ms.explain()[("quantize_rowcol", "nvfp4|none")]


@pytest.mark.parametrize("prologue", ["relu_square", "relu_square_grad"])
def test_row_kernel_rht_with_a_prologue(prologue, row1):
    """A row view with the RHT of ``op(x, u)``: its amax comes from the v3 amax pass, which
    applies no prologue, so the op is computed first (not fused) and the amax, scales and codes
    equal the reference's."""
    x = _x((32, 64), seed=12)
    u = _x((32, 64), seed=13) if prologue == "relu_square_grad" else None
    row = (N, {**NF, "rht": True})
    got = quantize_views(x, row, None, "triton", prologue=prologue, x2=u)[0]
    path = ms.explain()[("quantize_rowcol", "nvfp4|none")]
    assert "rotated there" in path and "fused" not in path, path
    want = quantize_views(x, row, None, "reference", prologue=prologue, x2=u)[0]
    assert _same(got.amax, want.amax)
    assert _same(got.data.view(torch.uint8), want.data.view(torch.uint8))
    assert _same(got.scale.view(torch.uint8), want.scale.view(torch.uint8))


@pytest.mark.parametrize("shape,dtype", [((64, 256), torch.bfloat16), ((37, 48), torch.bfloat16),
                                         ((20, 272), torch.float16)])
def test_row_kernel_rht_matches_reference(shape, dtype, row1):
    """The RHT'd row view (NaN filling its block, Inf clamped, a huge value, partial tiles, a
    block whose signed sum overflows fp32 unless its input is clamped)."""
    _check_against_reference(_x_rht(shape, dtype, seed=11), "cpu", rht=True)


def _x_subnormal(shape, seed):
    """bf16 subnormals only (random magnitudes and signs, a few zeros): every rotated value and
    every maximum stays below fp32's and bf16's smallest normal, where a flush to zero or a
    rounding that drops the subnormal grid would show."""
    g = torch.Generator().manual_seed(seed)
    mag = torch.randint(0, 128, shape, generator=g, dtype=torch.int32)
    sign = torch.randint(0, 2, shape, generator=g, dtype=torch.int32) << 15
    return (mag | sign).to(torch.int16).view(torch.bfloat16)


@pytest.mark.parametrize("rht", [True, False])
def test_row_kernel_subnormal_input(rht, row1):
    """A tensor of bf16 subnormals, rotated or not, against the reference."""
    _check_against_reference(_x_subnormal((16, 96), seed=4), "cpu", rht=rht)


def _x_rht(shape, dtype, seed):
    """``_x`` with row 8's second block ``c · s_j`` (``s_j`` the RHT's signs): its rotation's
    first output is ``4c``, past fp32 for c past 2^125 unless the input clamp takes c there."""
    from microscale.kernels.quant_nvfp4_reg import RHT_SIGN_MASK
    x = _x(shape, dtype, seed=seed)
    c = 3e38 if dtype == torch.bfloat16 else 6e4
    x[8, 16:32] = torch.tensor([c * (1 - 2 * ((RHT_SIGN_MASK >> j) & 1)) for j in range(16)])
    return x


# the kernel's switches (CONFIG["ROW1"] keys, both on by default): a NaN-free tile without
# per-element NaN selects; one 8-byte store of a block's code words, stores in the thread's
# layout. Each off, both off, codes at the expanded views' tile, and the next tile's words
# loaded while a tile is quantized (PREFETCH) on and off, and Philox's products as two
# multiplies (tl.randint4x) instead of one wide one (PHILOX_WIDE, on by default), and the SR
# codes' random bytes placed by a byte permute (SR_PRMT, off until timed on a GPU)
VARIANTS = [{"NAN_TILE": False}, {"STORE64": False}, {"NAN_TILE": False, "STORE64": False},
            {"RNE_CODES": {}, "SR_CODES": {}}, {"PREFETCH": True}, {"PREFETCH": False},
            {"PHILOX_WIDE": False}, {"SR_PRMT": True}]


@pytest.mark.parametrize("opts,shape,dtype", [
    *[(o, (32, 128), torch.bfloat16) for o in VARIANTS],
    (VARIANTS[2], (48, 80), torch.float16), ({}, (48, 272), torch.bfloat16)],
    ids=lambda v: "+".join(f"{k}={w}" for k, w in v.items()) or "defaults"
    if isinstance(v, dict) else None)
@pytest.mark.slow
def test_row_kernel_variants(opts, shape, dtype, row1, gpu_tiles, monkeypatch):
    """Each switch gives the same bits: against the reference (codes from caller bytes, scales,
    amax, the expanded view) and, for in-kernel Philox, against the reg pass. At the GPU's
    tiles (the suite's interpreter runs take 64-row ones elsewhere,
    ``conftest._interpreter_tiles``): ``_x``'s NaN sits in one tile, so a NaN-tile launch
    takes both of its paths; (48, 80) leaves partial tiles, (48, 272) a partial tile of blocks
    with every switch at its default."""
    from microscale.kernels import quant_nvfp4
    gpu = gpu_tiles.configs("quant_nvfp4").get("ROW1", {})   # its tiles, not its switches
    tiles = {k: gpu[k] for k in ("BR", "NB", "RNE_CODES", "SR_CODES", "RHT_CODES") if k in gpu}
    monkeypatch.setitem(quant_nvfp4.CONFIG, "ROW1",
                        {**quant_nvfp4.CONFIG["ROW1"], **tiles, **opts})
    x = _x(shape, dtype, seed=8)
    x[-1, -3] = -float("nan")                     # a second NaN tile, a negative NaN
    _check_against_reference(x, "cpu")
    if opts == {}:                                # the rotated codes at their own tile
        _check_against_reference(_x_rht(shape, dtype, seed=8), "cpu", rht=True)
    _philox_pairs(x, "cpu", row1)


@pytest.mark.gpu
@pytest.mark.parametrize("opts", [{}, VARIANTS[2], VARIANTS[4], VARIANTS[5], VARIANTS[6],
                                  VARIANTS[7]],
                         ids=["default", "switches-off", "prefetch", "no-prefetch",
                              "philox-mulhilo", "sr-prmt"])
@pytest.mark.parametrize("shape", [(4096, 768), (2000, 2048)])
def test_gpu_row_kernel(shape, opts, row1, monkeypatch):
    """Compiled: against the reference (the E2M1 code through 2^-126 needs fp32 subnormals
    kept) and, for Philox, against the reg pass; with the kernel's switches off and on."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from microscale.kernels import quant_nvfp4
    monkeypatch.setitem(quant_nvfp4.CONFIG, "ROW1", {**quant_nvfp4.CONFIG["ROW1"], **opts})
    x = _x(shape, seed=7)
    _check_against_reference(x, "cuda")
    _check_against_reference(_x_rht(shape, torch.bfloat16, seed=7), "cuda", rht=True)
    for rht in (True, False):
        _check_against_reference(_x_subnormal(shape, seed=5), "cuda", rht=rht)
    _philox_pairs(x, "cuda", row1)


@triton.jit
def _draw_both(seed_ptr, out_ref, out_new, N: tl.constexpr):
    """Four words a counter from ``tl.randint4x`` and from ``philox4x32``, interleaved."""
    seed = tl.load(seed_ptr)
    offs = tl.arange(0, N) * 7919 + 12345
    at = tl.arange(0, N) * 4
    r0, r1, r2, r3 = tl.randint4x(seed, offs)
    n0, n1, n2, n3 = philox4x32(seed, offs)
    tl.store(out_ref + at, r0)
    tl.store(out_ref + at + 1, r1)
    tl.store(out_ref + at + 2, r2)
    tl.store(out_ref + at + 3, r3)
    tl.store(out_new + at, n0)
    tl.store(out_new + at + 1, n1)
    tl.store(out_new + at + 2, n2)
    tl.store(out_new + at + 3, n3)


def test_philox_wide_equals_randint4x():
    """``_philox.philox4x32`` (each round's two products as one wide multiply) draws
    ``tl.randint4x``'s words, bit for bit, for seeds of both signs and the int32 extremes (the
    key is the seed sign-extended). In the interpreter, its uint64 form; on the GPU its PTX
    form is checked through the row kernel's draws against the reg pass's
    (``test_gpu_row_kernel``)."""
    for seed in (0, 1, 123456789, -5, -2**31, 2**31 - 1):
        ref, new = (torch.zeros(4 * 64, dtype=torch.int32) for _ in range(2))
        _draw_both[(1,)](torch.tensor([seed], dtype=torch.int32), ref, new, 64)
        assert ref.abs().sum() > 0 and torch.equal(ref, new), seed
