"""The Triton grouped GEMM (``kernels/gemm_grouped.py``) against its reference twin: bf16 and FP8
block-scaled operands, both groupings, empty groups, ragged group sizes, a tail past the last
group, and the argument checks. CPU runs use Triton's interpreter (small tiles through
``config=`` so that the tile walk and the K loop take several steps)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from microscale.backend import _interpreting  # noqa: E402
from microscale.kernels.gemm_grouped import grouped_gemm, grouped_gemm_reference  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
SMALL = {"bf16": {"BM": 32, "BN": 32, "BK": 32, "num_warps": 4, "num_stages": 2},
         "fp8": {"BM": 32, "BN": 32, "BK": 128, "num_warps": 4, "num_stages": 2}}
needs_kernel = pytest.mark.skipif(DEV == "cpu" and not _interpreting(),
                                  reason="needs CUDA or TRITON_INTERPRET=1")


def _fp8(shape, dtype=torch.float8_e4m3fn, seed=0):
    g = torch.Generator().manual_seed(seed)
    top = 448.0 if dtype == torch.float8_e4m3fn else 57344.0
    return (torch.randn(shape, generator=g) * 40).clamp(-top, top).to(dtype).to(DEV)


def _scales(rows, cols, seed):
    """Non-uniform power-of-two scales: a wrong row block or chunk index changes the result."""
    g = torch.Generator().manual_seed(seed)
    return torch.exp2(torch.randint(-6, 3, (rows, cols), generator=g).float()).to(DEV)


def _offs(sizes):
    return torch.tensor(sizes, dtype=torch.int32).cumsum(0).to(torch.int32).to(DEV)


def _check(mode, a, b, offs, cfg, **kw):
    y = grouped_gemm(a, b, offs, mode, config=cfg, **kw)
    ref = grouped_gemm_reference(a, b, offs, mode, **kw)
    torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-3)   # fp32 summation order
    return y, ref


@needs_kernel
@pytest.mark.parametrize("sizes,tail", [([40, 0, 77, 19], 0), ([64], 0), ([5, 33], 30)])
def test_tokens_bf16(sizes, tail):
    E, K, N = len(sizes), 96, 80
    R = sum(sizes) + tail
    g = torch.Generator().manual_seed(1)
    a = torch.randn(R, K, generator=g).to(torch.bfloat16).to(DEV)
    b = torch.randn(E * N, K, generator=g).to(torch.bfloat16).to(DEV)
    y, _ = _check("tokens", a, b, _offs(sizes), SMALL["bf16"])
    if tail:
        assert torch.equal(y[sum(sizes):], torch.zeros_like(y[sum(sizes):]))
    if E > 1:   # each group used its own expert: the first expert's product differs
        start = sizes[0]
        wrong = a[start:start + sizes[1]].float() @ b[:N].float().t()
        assert sizes[1] == 0 or not torch.allclose(y[start:start + sizes[1]], wrong)


@needs_kernel
@pytest.mark.parametrize("br_b,b_dtype", [(128, torch.float8_e4m3fn), (1, torch.float8_e5m2)])
def test_tokens_fp8_block_scales(br_b, b_dtype):
    sizes, K, N = [45, 0, 128, 3], 256, 128
    E, R = len(sizes), sum(sizes) + 7
    a, b = _fp8((R, K), seed=2), _fp8((E * N, K), b_dtype, seed=3)
    sa = _scales(R, K // 128, 4)
    sb = _scales(-(-E * N // br_b), K // 128, 5)
    _check("tokens", a, b, _offs(sizes), SMALL["fp8"], sa=sa, sb=sb, br_a=1, br_b=br_b)


@needs_kernel
@pytest.mark.parametrize("fp8", [False, True])
def test_tokens_factor_and_bf16_output(fp8):
    """The per-group epilogue factor and a bf16 output: each group's rows are its fp32 sum
    times its own factor, rounded once (RNE); a tail past the last group stays zero even with
    an infinite factor; a wrong group's factor fails it (the factors differ by group)."""
    sizes, K, N = [45, 0, 70, 30], 256, 128
    E, R = len(sizes), sum(sizes) + 9
    factor = torch.tensor([0.37, 5.0, 1.7e-3, float("inf")]).to(DEV)
    factor[3] = 2.5                         # every group finite; the tail checks below
    if fp8:
        a, b = _fp8((R, K), seed=6), _fp8((E * N, K), seed=7)
        kw = dict(sa=_scales(R, K // 128, 8), sb=_scales(E * N // 128, K // 128, 9), br_a=1,
                  br_b=128)
    else:
        g = torch.Generator().manual_seed(2)
        a = torch.randint(-8, 9, (R, K), generator=g).to(torch.bfloat16).to(DEV)
        b = torch.randint(-8, 9, (E * N, K), generator=g).to(torch.bfloat16).to(DEV)
        kw = {}
    cfg = SMALL["fp8" if fp8 else "bf16"]
    y = grouped_gemm(a, b, _offs(sizes), "tokens", config=cfg, factor=factor,
                     out_dtype=torch.bfloat16, **kw)
    ref = grouped_gemm_reference(a, b, _offs(sizes), "tokens", factor=factor,
                                 out_dtype=torch.bfloat16, **kw)
    assert y.dtype == torch.bfloat16
    if fp8:
        torch.testing.assert_close(y.float(), ref.float(), rtol=2 ** -7, atol=1e-3)
    else:                      # integer sums: exact in fp32 in any order, so bit for bit
        assert torch.equal(y, ref)
    plain = grouped_gemm(a, b, _offs(sizes), "tokens", config=cfg, **kw)
    shuffled = torch.cat([plain[:45] * factor[2], plain[45:]]).to(torch.bfloat16)
    assert not torch.equal(y[:45], shuffled[:45])
    assert torch.equal(y[sum(sizes):], torch.zeros_like(y[sum(sizes):]))
    factor[3] = float("inf")               # the tail rows take no factor: still zeros
    y = grouped_gemm(a, b, _offs(sizes), "tokens", config=cfg, factor=factor,
                     out_dtype=torch.bfloat16, **kw)
    assert torch.equal(y[sum(sizes):], torch.zeros_like(y[sum(sizes):]))
    with pytest.raises(ValueError, match="tokens"):
        grouped_gemm(a, b, _offs(sizes), "reduce", factor=factor)


@needs_kernel
def test_reduce_bf16_and_fp8_with_an_empty_group():
    M, N, sizes = 48, 40, [128, 0, 256, 128]
    Kb = sum(sizes) + 128                       # a padded column layout may end past the last group
    g = torch.Generator().manual_seed(6)
    a = torch.randn(M, Kb, generator=g).to(torch.bfloat16).to(DEV)
    b = torch.randn(N, Kb, generator=g).to(torch.bfloat16).to(DEV)
    y, _ = _check("reduce", a, b, _offs(sizes), SMALL["bf16"])
    assert torch.equal(y[1], torch.zeros_like(y[1]))
    a8, b8 = _fp8((M, Kb), seed=7), _fp8((N, Kb), seed=8)
    y8, _ = _check("reduce", a8, b8, _offs(sizes), SMALL["fp8"], sa=_scales(M, Kb // 128, 9),
                   sb=_scales(N, Kb // 128, 10))
    assert torch.equal(y8[1], torch.zeros_like(y8[1]))


@needs_kernel
@pytest.mark.parametrize("mode,K,br_b", [("tokens", 256, 128), ("tokens", 144, 1),
                                         ("reduce", None, 1)])
def test_fp8_through_tma_equals_pointer_loads(mode, K, br_b, monkeypatch):
    """The TMA kernels (gemm_grouped_tma) read unmasked tiles: rows past a group's end, b rows
    past an expert's N, K past the end (zero-filled). Their results equal the pointer
    kernels' bit for bit (same tiles, same sums), empty groups and the tail included; NaN in
    rows only other groups' tiles read must not leak into a stored result."""
    import microscale.kernels.gemm_grouped_tma as gt
    taken = []
    for name in ("launch_tokens", "launch_reduce"):
        real = getattr(gt, name)
        monkeypatch.setattr(gt, name, lambda *a, _r=real, **k: taken.append(1) or _r(*a, **k))
    cfg = SMALL["fp8"]
    if mode == "tokens":
        sizes, N = [45, 0, 70, 30], 80                   # N not a multiple of BN: b spills over
        E, R = len(sizes), sum(sizes) + 9
        a, b = _fp8((R, K), seed=20), _fp8((E * N, K), seed=21)
        a[R - 9, 5] = b[N, 3] = float("nan")   # a tail row, expert 1 (no tokens): foreign only
        kb = -(-K // 128)
        kw = dict(sa=_scales(R, kb, 22), sb=_scales(-(-E * N // br_b), kb, 23), br_b=br_b)
        offs = _offs(sizes)
    else:
        M, N, sizes = 48, 40, [128, 0, 256, 128]
        Kb = sum(sizes) + 128
        a, b = _fp8((M, Kb), seed=24), _fp8((N, Kb), seed=25)
        a[3, 130] = float("nan")                          # group 2's: NaN in its own results only
        kw = dict(sa=_scales(M, Kb // 128, 26), sb=_scales(N, Kb // 128, 27))
        offs = _offs(sizes)
    y_tma = grouped_gemm(a, b, offs, mode, config={**cfg, "TMA": True}, **kw)
    assert taken, "the TMA kernel did not run"
    y_ptr = grouped_gemm(a, b, offs, mode, config={**cfg, "TMA": False}, **kw)
    assert len(taken) == 1
    assert torch.equal(y_tma.nan_to_num(1e30), y_ptr.nan_to_num(1e30))
    if mode == "tokens":
        assert torch.isfinite(y_tma).all()
        assert torch.equal(y_tma[R - 9:], torch.zeros_like(y_tma[R - 9:]))
    else:
        assert y_tma[2, 3].isnan().any() and torch.isfinite(y_tma[[0, 1, 3]]).all()


def test_argument_errors():
    a = torch.zeros(8, 32, dtype=torch.bfloat16)
    offs = torch.tensor([8], dtype=torch.int32)
    with pytest.raises(ValueError, match="mode"):
        grouped_gemm_reference(a, a, offs, "rows")
    with pytest.raises(ValueError, match="share K"):
        grouped_gemm_reference(a, a[:, :16], offs, "tokens")
    with pytest.raises(ValueError, match="must both be FP8"):
        grouped_gemm_reference(a, a.to(torch.float8_e4m3fn), offs, "tokens")
    with pytest.raises(ValueError, match="split into"):
        grouped_gemm_reference(a, a[:7], torch.tensor([4, 8], dtype=torch.int32), "tokens")
    a8 = a.to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="block scales"):
        grouped_gemm_reference(a8, a8, offs, "tokens")
    with pytest.raises(ValueError, match="br_b"):
        s = torch.ones(8, 1)
        grouped_gemm_reference(a8, a8, offs, "tokens", sa=s, sb=s, br_b=64)
    # "reduce" groups promise ends at multiples of k_align (vector loads in the kernel): the
    # reference, which reads offs, holds callers to it
    wide = torch.zeros(8, 64, dtype=torch.bfloat16)
    ends = torch.tensor([16, 40], dtype=torch.int32)
    assert grouped_gemm_reference(wide, wide, ends, "reduce", k_align=8).shape == (2, 8, 8)
    with pytest.raises(ValueError, match="multiples of 16, group 1 ends at 40"):
        grouped_gemm_reference(wide, wide, ends, "reduce", k_align=16)
    with pytest.raises(ValueError, match="power of two"):
        grouped_gemm_reference(wide, wide, ends, "reduce", k_align=24)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA only")
def test_gpu_deepseek_like_shape_without_host_sync():
    E, per, K, N = 8, 512, 1024, 512
    offs = _offs([per] * E)
    g = torch.Generator().manual_seed(11)
    a = torch.randn(E * per, K, generator=g).to(torch.bfloat16).cuda()
    b = torch.randn(E * N, K, generator=g).to(torch.bfloat16).cuda()
    a8, b8 = _fp8((E * per, K), seed=12), _fp8((E * N, K), seed=13)
    sa, sb = _scales(E * per, K // 128, 14), _scales(E * N // 128, K // 128, 15)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        y = grouped_gemm(a, b, offs, "tokens")
        y8 = grouped_gemm(a8, b8, offs, "tokens", sa=sa, sb=sb, br_b=128)
        yr = grouped_gemm(a.t().contiguous()[:N], a.t().contiguous()[:N], offs, "reduce")
        yr16 = grouped_gemm(a.t().contiguous()[:N], a.t().contiguous()[:N], offs, "reduce",
                            k_align=16)         # the group ends' promise: vector loads
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.testing.assert_close(y, grouped_gemm_reference(a, b, offs, "tokens"), rtol=1e-4, atol=1e-3)
    # FP8 tensor cores align each 128-product chain to its largest term, keeping ~14 bits below
    # it (SPEC N5), before the fp32 total: per chunk at most 128 · 2^-13 · max|a_k b_k| (a
    # truncation, so it can add up), bounded with max|a| · max|b| of the chunk
    ref8 = grouped_gemm_reference(a8, b8, offs, "tokens", sa=sa, sb=sb, br_b=128)
    top_a = a8.float().abs().view(E * per, K // 128, 128).amax(-1) * sa        # [T, KB]
    top_b = (b8.float().abs().view(E * N, K // 128, 128).amax(-1)
             * sb.repeat_interleave(128, 0))                                  # [E·N, KB]
    bound = grouped_gemm_reference(top_a, top_b, offs, "tokens") * 2.0 ** -6
    err = (y8 - ref8).abs()
    assert (err <= 2 * bound + 1e-3).all()
    assert err.norm() < 1e-2 * ref8.norm()      # a wrong expert, row block or chunk is O(1)
    at = a.t().contiguous()[:N]
    torch.testing.assert_close(yr, grouped_gemm_reference(at, at, offs, "reduce"), rtol=1e-4,
                               atol=1e-2)
    torch.testing.assert_close(yr16, yr, rtol=1e-5, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA only")
@pytest.mark.parametrize("mode", ["tokens", "reduce"])
def test_gpu_fp8_tma_equals_pointer_loads(mode):
    """On the GPU, at a DeepSeek-like size with uneven groups: the TMA kernels with the pointer
    kernels' tile give the same bits; their own default tile stays within the FP8 tensor
    cores' bound of the reference (as above)."""
    from microscale.kernels.gemm_grouped import CONFIG
    sizes = [700, 0, 1300, 333, 1763]
    E, K, N = len(sizes), 1024, 640
    if mode == "tokens":
        R = sum(sizes) + 50
        a, b = _fp8((R, K), seed=30), _fp8((E * N, K), seed=31)
        kw = dict(sa=_scales(R, K // 128, 32), sb=_scales(E * N // 128, K // 128, 33), br_b=128)
        offs = _offs(sizes)
    else:
        pads = [-(-s // 128) * 128 for s in sizes]
        Kb = sum(pads) + 128
        a, b = _fp8((N, Kb), seed=34), _fp8((K, Kb), seed=35)
        kw = dict(sa=_scales(N, Kb // 128, 36), sb=_scales(K, Kb // 128, 37))
        offs = _offs(pads)
    tile = CONFIG["fp8" if mode == "tokens" else "fp8_reduce"]
    y_ptr = grouped_gemm(a, b, offs, mode, config={**tile, "TMA": False}, **kw)
    y_tma = grouped_gemm(a, b, offs, mode, config={**tile, "TMA": True}, **kw)
    assert torch.equal(y_tma, y_ptr)
    y_def = grouped_gemm(a, b, offs, mode, config={"TMA": True}, **kw)
    ref = grouped_gemm_reference(a, b, offs, mode, **kw)
    assert (y_def - ref).norm() < 1e-2 * ref.norm()
    assert torch.equal(y_def.isnan(), ref.isnan())
