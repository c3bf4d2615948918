"""The GEMM with NVFP4's α in its epilogue (kernels/gemm_alpha.py) and the layer's use of it.

CPU: the pointer kernel in Triton's interpreter against ``round(α · fp32 mm)`` of the same bf16
operands; the sums may differ only by summation order, so the outputs must agree to one unit
in the last place of the output dtype (and exactly where the fp32 sums are exact). GPU: the
TMA kernel the same way, the layer's outputs and gradients with the epilogue on and off, and
which path ``ms.explain`` reports.
"""

from __future__ import annotations

import importlib.util
import itertools
import os

import pytest
import torch

HAS_TRITON = importlib.util.find_spec("triton") is not None
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
HAS_CUDA = torch.cuda.is_available()
pytestmark = pytest.mark.skipif(not HAS_TRITON or not (INTERPRET or HAS_CUDA),
                                reason="needs Triton and CUDA or TRITON_INTERPRET=1")
DEV = "cuda" if HAS_CUDA and not INTERPRET else "cpu"


def _ulps(y: torch.Tensor, ref: torch.Tensor) -> int:
    """Largest distance in units of the last place of ``ref``'s dtype (same-sign values)."""
    bits = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}
    a, b = y.view(bits[y.dtype]).long(), ref.view(bits[ref.dtype]).long()
    return int((a - b).abs().max()) if y.numel() else 0


def _small_ints(shape, gen) -> torch.Tensor:
    """bf16 integers in [-8, 8]: every product and partial sum is exact in fp32, so the sum
    does not depend on its order and the output must equal the reference bit for bit."""
    return torch.randint(-8, 9, shape, generator=gen).to(torch.bfloat16)


def _tie_operands():
    """bf16 ``a [16, 16]``, ``b = 1``: every row of ``a bᵀ`` sums to 8.09375 (K = 16), halfway
    between the bf16 numbers 8.0625 and 8.125."""
    row = [1.0] * 8 + [2.0 ** -4, 2.0 ** -5] + [0.0] * 6
    return torch.tensor([row] * 16, dtype=torch.bfloat16), torch.ones(16, 16, dtype=torch.bfloat16)


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("mnk", [(64, 48, 32), (130, 300, 80), (1, 17, 16), (200, 64, 96)])
def test_alpha_mm_matches_reference(out_dtype, mnk):
    from microscale.kernels.gemm_alpha import alpha_mm
    m, n, k = mnk
    gen = torch.Generator().manual_seed(m * n + k)
    a, b = _small_ints((m, k), gen), _small_ints((n, k), gen)
    f = torch.tensor([0.3711], dtype=torch.float32)
    ref = ((a.float() @ b.float().t()) * f).to(out_dtype)
    y = alpha_mm(a.to(DEV), b.to(DEV), f.to(DEV), out_dtype, BM=64, BN=64, BK=32,
                 NUM_STAGES=1, num_warps=4, TMA=False)
    assert y.dtype == out_dtype and y.shape == (m, n)
    assert torch.equal(y.cpu(), ref)          # exact sums: one rounding, RNE, bit for bit
    # random values: the fp32 sums differ by order only
    a, b = torch.randn(m, k, generator=gen).bfloat16(), torch.randn(n, k, generator=gen).bfloat16()
    ref = ((a.float() @ b.float().t()) * f).to(out_dtype)
    y = alpha_mm(a.to(DEV), b.to(DEV), f.to(DEV), out_dtype, BM=64, BN=64, BK=32,
                 NUM_STAGES=1, num_warps=4, TMA=False).cpu()
    close = torch.isclose(y.float(), ref.float(), rtol=2 ** -7, atol=1e-4)
    assert bool(close.all())


@pytest.mark.parametrize("mnk", [(64, 48, 32), (130, 300, 80), (1, 17, 16)])
def test_alpha_mm_b_as_transposed_view(mnk, monkeypatch):
    """B given as the transpose of a row-major ``[K, N]`` (how dgrad reads an expanded 16×16
    weight): read in place (the kernel gets B's own storage), the same bits as the
    K-contiguous copy."""
    from microscale.kernels import gemm_alpha
    m, n, k = mnk
    seen, kernel = [], gemm_alpha._alpha_mm_kernel

    class _Spy:
        def __getitem__(self, grid):
            def launch(*args, **kw):
                seen.append(args[1].data_ptr())
                return kernel[grid](*args, **kw)
            return launch
    monkeypatch.setattr(gemm_alpha, "_alpha_mm_kernel", _Spy())
    gen = torch.Generator().manual_seed(n + k)
    a = torch.randn(m, k, generator=gen).bfloat16().to(DEV)
    b_kn = torch.randn(k, n, generator=gen).bfloat16().to(DEV)
    f = torch.tensor([0.3711], dtype=torch.float32, device=DEV)
    tile = dict(BM=64, BN=64, BK=32, NUM_STAGES=1, num_warps=4, TMA=False)
    y = gemm_alpha.alpha_mm(a, b_kn.t(), f, torch.bfloat16, **tile)
    assert seen == [b_kn.data_ptr()]
    assert torch.equal(y, gemm_alpha.alpha_mm(a, b_kn.t().contiguous(), f, torch.bfloat16,
                                              **tile))
    ints = _small_ints((k, n), gen).to(DEV)                  # exact sums: the reference's bits
    a_int = _small_ints((m, k), gen).to(DEV)
    ref = ((a_int.float() @ ints.float()) * f).bfloat16()
    assert torch.equal(gemm_alpha.alpha_mm(a_int, ints.t(), f, torch.bfloat16, **tile), ref)


def test_alpha_mm_rounds_to_nearest_even_once():
    """Sums that land between two bf16 numbers: a tie goes to even (the interpreter's plain
    cast truncates, which would fail), and α multiplies the fp32 sum, not a rounded one."""
    from microscale.kernels.gemm_alpha import alpha_mm
    a, b = _tie_operands()
    cases = [(1.0, 8.125),      # halfway between 8.0625 (odd) and 8.125 (even): up, to even
             (3.0, 24.25)]      # 24.28125: nearest is 24.25 (the sum rounded first: 24.375)
    for f, want in cases:
        y = alpha_mm(a.to(DEV), b.to(DEV), torch.tensor([f]).to(DEV), torch.bfloat16, BM=16,
                     BN=16, BK=16, NUM_STAGES=1, num_warps=4, TMA=False).cpu()
        assert torch.equal(y, torch.full((16, 16), want, dtype=torch.bfloat16)), (f, y[0, 0])


@pytest.mark.parametrize("amaxes", [(3.5, 0.021), (float("inf"), 7.0), (float("nan"), 1.0),
                                    (0.0, 5.0), (1e-30, 3e30)])
def test_alpha_from_amaxes_is_nvfp4_alpha(amaxes):
    """α made in the kernel from the two amaxes equals ``nvfp4_alpha`` bit for bit (Inf enters
    as 2688, NaN propagates, IEEE division)."""
    from microscale.kernels.gemm_alpha import alpha_mm
    from microscale.quant.nvfp4 import nvfp4_alpha
    amax_a, amax_b = (torch.tensor(v, dtype=torch.float32) for v in amaxes)
    a = torch.eye(16, dtype=torch.bfloat16)
    b = torch.eye(16, dtype=torch.bfloat16)
    y = alpha_mm(a.to(DEV), b.to(DEV), (amax_a.to(DEV), amax_b.to(DEV)), torch.float32,
                 BM=16, BN=16, BK=16, NUM_STAGES=1, num_warps=4, TMA=False).cpu()
    want = nvfp4_alpha(amax_a, amax_b)
    got = y[0, 0]
    assert (torch.isnan(want) and torch.isnan(got)) or torch.equal(got, want), (got, want)
    assert torch.equal(y[0, 1], torch.zeros((), dtype=torch.float32)) or torch.isnan(want)


def test_narrow_tile_where_wide_tiles_leave_columns_empty():
    """The 128-wide tile where 256-wide tiles would leave an eighth or more of their columns
    empty (50m's 640- and 128-wide outputs), the wide ones elsewhere (every 125m/350m/1b width,
    and 1152, whose empty eighth is short), and never where the caller turns it off."""
    from microscale.kernels.gemm_alpha import CONFIG, tile_for
    narrow, small, wide = CONFIG["NARROW_TILE"], CONFIG["SMALL_TILE"], CONFIG["TILE"]
    assert tile_for(640, 2560) is narrow and tile_for(128, 640) is narrow
    assert tile_for(384, 4096) is narrow and tile_for(200, 96) is narrow
    assert tile_for(768, 768) is small and tile_for(1152, 768) is small
    assert tile_for(2048, 8192) is wide and tile_for(14336, 4096) is wide
    assert tile_for(640, 2560, narrow=False) is small


def test_alpha_mm_bad_arguments():
    from microscale.kernels.gemm_alpha import alpha_mm
    f = torch.ones(1)
    with pytest.raises(ValueError, match="alpha_mm"):
        alpha_mm(torch.ones(4, 16), torch.ones(4, 16), f, torch.bfloat16)      # fp32 operands
    with pytest.raises(ValueError, match="alpha_mm"):
        alpha_mm(torch.ones(4, 16).bfloat16(), torch.ones(4, 32).bfloat16(), f, torch.bfloat16)


def test_layer_asks_for_fp32_off_cuda():
    """Off CUDA the layer keeps the traced α (the reference GEMM's fp32 sum): the switch only
    concerns the CUDA kernels."""
    from microscale.kernels.gemm_paths import factor_in_epilogue
    assert not factor_in_epilogue("nvfp4", "nvfp4", 64, 64, 64, torch.bfloat16,
                                  torch.device("cpu"))
    assert not factor_in_epilogue("mxfp4", "mxfp4", 64, 64, 64, torch.bfloat16,
                                  torch.device("cuda"))
    assert not factor_in_epilogue("nvfp4", "nvfp4", 64, 64, 64, torch.float32,
                                  torch.device("cuda"))


def test_bf16_output_without_the_kernel_rounds_once():
    """``gemm_fp4``'s dequant path for a bf16 output with α and no epilogue kernel (CPU here):
    fp32 sum, α, one rounding (before session 16 a CUDA call rounded the sum to bf16 first)."""
    from microscale.kernels import gemm_alpha
    a, b = _tie_operands()
    y = gemm_alpha._bf16_gemm_with_factor(a, b, torch.tensor([3.0]), torch.bfloat16)
    assert torch.equal(y, torch.full((16, 16), 24.25, dtype=torch.bfloat16))


# ----------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA or INTERPRET, reason="needs CUDA")
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("mnk", [(16384, 768, 3072), (1000, 2304, 768), (4096, 200, 96),
                                 (3072, 768, 16384)])
def test_gpu_alpha_mm_tma_and_pointer(mnk, out_dtype):
    """Every tile knob, B both ways, a 2-byte and an fp32 output (``alpha_mm`` takes both;
    the TMA kernel stores an fp32 tile in halves at <= 3 stages), the last shape a 125m
    weight gradient's."""
    from microscale.kernels.gemm_alpha import alpha_mm
    m, n, k = mnk
    gen = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randint(-8, 9, (m, k), device="cuda", generator=gen).bfloat16()
    b = torch.randint(-8, 9, (n, k), device="cuda", generator=gen).bfloat16()
    f = torch.tensor([0.3711], device="cuda")
    ref = (torch.mm(a, b.t(), out_dtype=torch.float32) * f).to(out_dtype)
    b_kn = b.t().contiguous()             # B as the transpose of a row-major [K, N]
    knobs = [{"TMA": True}, {"TMA": False}, {"TMA": True, "SUBTILE": True, "NUM_STAGES": 4},
             {"TMA": True, "FLATTEN": False}, {"TMA": True, "FLATTEN": False, "WS": True}]
    for knob in knobs:                    # the same MMAs in the same K order: the same bits
        assert torch.equal(alpha_mm(a, b, f, out_dtype, **knob), ref), knob
        assert torch.equal(alpha_mm(a, b_kn.t(), f, out_dtype, **knob), ref), knob


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA or INTERPRET, reason="needs CUDA")
@pytest.mark.parametrize("mnk", [(16384, 3072, 768), (4096, 8192, 2048), (1000, 2304, 768)])
def test_gpu_alpha_mm_epilogue_tma_and_pointer(mnk):
    """The relu² backward's epilogue on the GPU (the 125m and 1b down projections' dgrad
    shapes, a partial tile): TMA and pointer kernels, bit for bit the op after the GEMM."""
    from microscale.kernels.gemm_alpha import alpha_mm
    from microscale.op_specs import apply_prologue
    m, n, k = mnk
    a, b, u = _epilogue_operands(m, n, k, torch.bfloat16, torch.Generator().manual_seed(2))
    a, b, u = a.cuda(), b.cuda(), u.cuda()
    f = torch.tensor([0.3711], device="cuda")
    want = apply_prologue("relu_square_grad", alpha_mm(a, b, f, torch.bfloat16), u)
    for knob in ({"TMA": True}, {"TMA": False}):
        got = alpha_mm(a, b, f, torch.bfloat16, epilogue=("relu_square_grad", u), **knob)
        assert torch.equal(got.isnan(), want.isnan()), knob
        assert torch.equal(got.nan_to_num(0.0), want.nan_to_num(0.0)), knob


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA or INTERPRET, reason="needs CUDA")
def test_gpu_layer_epilogue_on_and_off():
    """nvfp4 layer, fprop and dgrad through the epilogue kernel vs the fp32 + traced α path:
    the same bits up to summation order; ms.explain names the path."""
    import microscale as ms
    from microscale.kernels import gemm_paths
    torch.manual_seed(0)
    lin = ms.Linear(768, 2304, recipe="nvfp4_no_sr").cuda()
    x = torch.randn(4096, 768, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    outs = []
    for on in (True, False):
        gemm_paths.EPILOGUE["alpha"] = on
        try:
            x.grad = None
            lin.zero_grad()
            with torch.autocast("cuda", torch.bfloat16):
                y = lin(x)
            # the forward GEMM's path (backward's wgrad, an fp32 output, records cuBLAS after)
            # (this op's own entry: other tests' entries in the same process may say
            # "epilogue" too)
            assert ("epilogue" in ms.explain()[("scaled_mm", "nvfp4xnvfp4")]) == on
            y.float().square().mean().backward()
            outs.append((y.detach(), x.grad.clone()))
        finally:
            gemm_paths.EPILOGUE["alpha"] = True
    (y1, g1), (y0, g0) = outs
    assert torch.allclose(y1.float(), y0.float(), rtol=2 ** -7, atol=1e-3)
    assert torch.allclose(g1.float(), g0.float(), rtol=2 ** -7, atol=1e-6)


def test_fp32_outputs_take_the_kernel_by_tile_count(monkeypatch):
    """``gemm_paths.alpha_epilogue``: a 2-byte output on CUDA always takes the α kernel; an fp32
    one (wgrad's) only with ``EPILOGUE["fp32_min_tiles"]`` 128x256 output tiles or more, and
    only for plain int shapes; never off CUDA or with the switch off."""
    from microscale.kernels import gemm_paths
    rule = gemm_paths.alpha_epilogue
    cuda = torch.device("cuda")
    monkeypatch.setitem(gemm_paths.EPILOGUE, "fp32_min_tiles", None)
    assert rule(torch.bfloat16, cuda) and rule(torch.float16, cuda, 1, 1)
    assert not rule(torch.float32, cuda, 1 << 14, 1 << 14)
    monkeypatch.setitem(gemm_paths.EPILOGUE, "fp32_min_tiles", 6)
    assert rule(torch.float32, cuda, 256, 768)              # 2 x 3 tiles
    assert rule(torch.float32, cuda, 257, 513)              # 3 x 3: partial tiles count
    assert not rule(torch.float32, cuda, 256, 512)          # 2 x 2
    assert not rule(torch.float32, cuda, 256.0, 768)        # not a plain int: no decision
    assert not rule(torch.float32, cuda)
    assert not rule(torch.float32, torch.device("cpu"), 4096, 4096)
    monkeypatch.setitem(gemm_paths.EPILOGUE, "alpha", False)
    assert not rule(torch.float32, cuda, 4096, 4096) and not rule(torch.bfloat16, cuda)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA or INTERPRET, reason="needs CUDA")
def test_gpu_layer_wgrad_alpha_in_the_epilogue(monkeypatch):
    """``EPILOGUE["fp32_min_tiles"]``: an nvfp4 layer whose weight gradient has enough tiles
    gets it from the α kernel (fp32 written with α applied), the same values up to summation
    order as cuBLAS's fp32 sum times α; below the count, cuBLAS."""
    import microscale as ms
    from microscale.kernels import gemm_alpha, gemm_paths
    torch.manual_seed(0)
    lin = ms.Linear(768, 2304, recipe="nvfp4_no_sr").cuda()       # wgrad: 18 x 3 tiles
    x = torch.randn(4096, 768, device="cuda", dtype=torch.bfloat16)
    seen, real = [], gemm_alpha.alpha_mm
    monkeypatch.setattr(gemm_alpha, "alpha_mm", lambda *a, **k: seen.append(a[3]) or real(*a, **k))
    grads = []
    for least in (None, 54, 55):
        monkeypatch.setitem(gemm_paths.EPILOGUE, "fp32_min_tiles", least)
        seen.clear()
        lin.zero_grad()
        with torch.autocast("cuda", torch.bfloat16):
            y = lin(x)
        y.float().square().mean().backward()
        grads.append(lin.weight.grad.clone())
        assert seen.count(torch.float32) == (least == 54), (least, seen)
    assert torch.equal(grads[0], grads[2])
    assert torch.allclose(grads[1], grads[0], rtol=2 ** -16, atol=1e-9)
    assert not torch.equal(grads[1], torch.zeros_like(grads[1]))


def _epilogue_operands(m, n, k, dtype, gen):
    """Exact-sum operands (the output equals the reference bit for bit) and a second tensor
    with the ops' edge values: +0, -0, negatives, NaN, Inf, a huge value (2 u overflows)."""
    a, b = _small_ints((m, k), gen), _small_ints((n, k), gen)
    u = torch.randn(m, n, generator=gen).to(dtype)
    flat = u.view(-1)
    flat[:7] = torch.tensor([0.0, -0.0, -1.5, float("nan"), float("inf"), -float("inf"),
                             torch.finfo(dtype).max])
    return a.to(dtype), b.to(dtype), u


@pytest.mark.parametrize("op", ["relu_square_grad", "mul"])
@pytest.mark.parametrize("dtype,mnk", [(torch.bfloat16, (130, 72, 32)),
                                       (torch.float16, (64, 300, 48))])
def test_alpha_mm_epilogue_is_the_op_after(op, dtype, mnk):
    """``epilogue=(op, u)``: the kernel's output is ``apply_prologue(op, y, u)`` of its plain
    output, bit for bit (the output rounded, the op, its rounding), partial tiles included."""
    from microscale.kernels.gemm_alpha import alpha_mm
    from microscale.op_specs import apply_prologue
    m, n, k = mnk
    a, b, u = _epilogue_operands(m, n, k, dtype, torch.Generator().manual_seed(m + n))
    f = torch.tensor([0.3711], dtype=torch.float32, device=DEV)
    tile = dict(BM=64, BN=64, BK=32, NUM_STAGES=1, num_warps=4, TMA=False)
    y = alpha_mm(a.to(DEV), b.to(DEV), f, dtype, **tile)
    got = alpha_mm(a.to(DEV), b.to(DEV), f, dtype, epilogue=(op, u.to(DEV)), **tile)
    want = apply_prologue(op, y, u.to(DEV))
    assert got.dtype == dtype and torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.nan_to_num(0.0), want.nan_to_num(0.0))


def test_alpha_mm_epilogue_bad_arguments():
    from microscale.kernels.gemm_alpha import alpha_mm
    a = torch.ones(16, 16, dtype=torch.bfloat16, device=DEV)
    f = torch.ones(1, device=DEV)
    with pytest.raises(ValueError, match="epilogue must be one of"):
        alpha_mm(a, a, f, torch.bfloat16, epilogue=("square", None))
    with pytest.raises(ValueError, match=r"needs e2 of shape \(16, 16\)"):
        alpha_mm(a, a, f, torch.bfloat16, epilogue=("mul", a[:8]))
    with pytest.raises(ValueError, match=r"needs e2 of shape \(16, 16\)"):
        alpha_mm(a, a, f, torch.bfloat16, epilogue=("mul", a.float()))


@pytest.mark.parametrize("backend", ["reference", "triton"])
def test_scaled_mm_epilogue_through_the_op(backend):
    """``ops.mm(..., epilogue=(op, e2))`` = the op applied to ``ops.mm``'s result, for NVFP4
    operands (expanded, as the layers pass them, and codes) on each backend; a bad epilogue
    is a ValueError naming it."""
    from microscale.op_specs import apply_prologue
    from microscale.ops import mm, quantize_views
    from microscale.tensor import QFormat
    gen = torch.Generator().manual_seed(3)
    x, w = torch.randn(96, 64, generator=gen), torch.randn(48, 64, generator=gen)
    u = torch.randn(96, 48, generator=gen).bfloat16()
    u[0, :3] = torch.tensor([float("nan"), -0.0, 0.0])
    nf = {"check_finite": False}
    for expand in (False, True):
        qx = quantize_views(x, (QFormat.NVFP4, {**nf, "expand": expand}), None, "reference")[0]
        qw = quantize_views(w, (QFormat.NVFP4, nf), None, "reference")[0]
        y = mm(qx, qw, torch.bfloat16, backend)
        got = mm(qx, qw, torch.bfloat16, backend, epilogue=("relu_square_grad", u))
        want = apply_prologue("relu_square_grad", y, u)
        assert torch.equal(got.isnan(), want.isnan())
        assert torch.equal(got.nan_to_num(0.0), want.nan_to_num(0.0))
    with pytest.raises(ValueError, match="epilogue must be one of"):
        mm(qx, qw, torch.bfloat16, backend, epilogue=("relu", u))
    with pytest.raises(ValueError, match="needs e2 of shape"):
        mm(qx, qw, torch.bfloat16, backend, epilogue=("mul", u.float()))


def _amax_case(m, n, k, dtype, seed, huge_chunk: bool):
    """``_epilogue_operands`` (NaN, Inf and a huge u among the values), optionally with one
    16-row chunk of a column of large finite values (their rotation needs the input clamp
    only where the tile holds an Inf or a value above 2^125: both tile kinds occur)."""
    a, b, u = _epilogue_operands(m, n, k, dtype, torch.Generator().manual_seed(seed))
    if huge_chunk and dtype == torch.bfloat16:
        u[16:32, n - 1] = 1e35
    return a, b, u


@pytest.mark.parametrize("dtype,mnk", [(torch.bfloat16, (144, 72, 32)),
                                       (torch.float16, (64, 300, 48))])
@pytest.mark.parametrize("epilogue,amax_op", [(False, ""), (True, ""), (False, "relu_square")])
def test_alpha_mm_out_amax_is_the_amax_pass(dtype, mnk, epilogue, amax_op):
    """``out_amax`` (``op_specs.OutAmax``): the epilogue measures the stored output's NVFP4
    amaxes, ``max|y|`` and (``rht``) ``max|RHT(y)|`` down the columns' 16-row chunks (of
    ``relu(y)²`` with that op), bit for bit what the reference measures of the output
    (``out_amax_reference``: NaN read as 0, the RHT's input clamp), with NaN, Inf,
    overflowing and huge outputs, partial tiles."""
    from microscale.kernels.gemm_alpha import alpha_mm
    from microscale.op_specs import OutAmax, out_amax_reference
    m, n, k = mnk
    a, b, u = (t.to(DEV) for t in _amax_case(m, n, k, dtype, m + n, True))
    f = torch.tensor([0.3711], dtype=torch.float32, device=DEV)
    tile = dict(BM=64, BN=64, BK=32, NUM_STAGES=1, num_warps=4, TMA=False)
    epi = ("relu_square_grad", u) if epilogue else None
    plain = alpha_mm(a, b, f, dtype, epilogue=epi, **tile)
    measured = {}
    for rht in (True, False):
        req = OutAmax(torch.zeros(2, device=DEV), rht, amax_op)
        y = alpha_mm(a, b, f, dtype, epilogue=epi, out_amax=req, **tile)
        assert req.filled and torch.equal(y.isnan(), plain.isnan())
        assert torch.equal(y.nan_to_num(0.0), plain.nan_to_num(0.0))
        measured[rht] = want = out_amax_reference(y, rht, amax_op)
        assert torch.equal(req.buf, want), (rht, req.buf.tolist(), want.tolist())
    if epilogue:       # an Inf output: max|y| is Inf, the clamped rotation's maximum finite
        assert torch.isinf(measured[True][0]) and torch.isfinite(measured[True][1])


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA or INTERPRET, reason="needs CUDA")
@pytest.mark.parametrize("mnk", [(4096, 8192, 2048), (1008, 2304, 768)])
def test_gpu_alpha_mm_out_amax(mnk):
    """The same on the GPU (the 1b down projection's dgrad shape, a partial tile): TMA and
    pointer kernels measure the amax pass's amaxes of their output (relu²'s backward in the
    epilogue: du), or of relu² of it (u), with NaN, Inf, overflowing and huge outputs, and
    plain normal ones."""
    from microscale.kernels.gemm_alpha import alpha_mm
    from microscale.op_specs import OutAmax, out_amax_reference
    m, n, k = mnk
    f = torch.tensor([0.3711], device="cuda")
    for special in (True, False):
        a, b, u = (t.cuda() for t in _amax_case(m, n, k, torch.bfloat16, 5, special))
        if not special:
            u = torch.randn(m, n, device="cuda").bfloat16()
        for knob, rht, op in itertools.product(({"TMA": True}, {"TMA": False}), (True, False),
                                               ("", "relu_square")):
            req = OutAmax(torch.zeros(2, device="cuda"), rht, op)
            epi = None if op else ("relu_square_grad", u)     # as the MLP asks: u, then du
            y = alpha_mm(a, b, f, torch.bfloat16, epilogue=epi, out_amax=req, **knob)
            want = out_amax_reference(y, rht, op)
            assert torch.equal(req.buf, want), (knob, rht, op, req.buf.tolist(), want.tolist())


@pytest.mark.parametrize("backend", ["reference", "triton"])
def test_mm_amax_through_the_op(backend):
    """``ops_gemm.mm_amax``: ``ops.mm``'s output (with the relu² backward's epilogue) and its
    two NVFP4 amaxes, whichever GEMM ran (off the α kernel the op measures them after it)."""
    from microscale.op_specs import out_amax_reference
    from microscale.ops import mm, quantize_views
    from microscale.ops_gemm import mm_amax
    from microscale.tensor import QFormat
    gen = torch.Generator().manual_seed(4)
    x, w = torch.randn(96, 64, generator=gen), torch.randn(48, 64, generator=gen)
    u = torch.randn(96, 48, generator=gen).bfloat16()
    nf = {"check_finite": False}
    qx = quantize_views(x, (QFormat.NVFP4, {**nf, "expand": True}), None, "reference")[0]
    qw = quantize_views(w, (QFormat.NVFP4, nf), None, "reference")[0]
    want = mm(qx, qw, torch.bfloat16, backend, epilogue=("relu_square_grad", u))
    for rht in (True, False):
        y, amaxes = mm_amax(qx, qw, torch.bfloat16, backend, ("relu_square_grad", u), rht)
        assert torch.equal(y, want)
        assert torch.equal(amaxes, out_amax_reference(want, rht))
