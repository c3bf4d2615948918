"""The register-layout grouped NVFP4 quantizer (``kernels/quant_nvfp4_grouped_reg.py``): equal to
its PyTorch twin (``quant.grouped.quantize_segments``) bit for bit given the same SR bytes, and,
with in-kernel Philox, to the dense Triton quantizers on each expert's tokens alone."""

from __future__ import annotations

import os

import pytest
import torch

import microscale as ms
from microscale.kernels import grouped as fast
from microscale.kernels.quant_nvfp4_grouped_reg import group_tables, quantize_nvfp4_grouped_views
from microscale.quant.grouped import group_layout, quantize_segments, segment_sr_bytes
from microscale.tensor import QFormat

pytestmark = [pytest.mark.usefixtures("single_thread"),
              pytest.mark.skipif(os.environ.get("TRITON_INTERPRET", "0") != "1"
                                 and not torch.cuda.is_available(),
                                 reason="Triton kernels: TRITON_INTERPRET=1 on CPU")]
DEV = "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1" \
    else "cpu"


def _bits(q):
    return q.view(torch.uint8) if q.dtype.itemsize == 1 else q


def _setup(counts, k, dtype, seed=0):
    """Tokens, per-expert seeds and the layout. fp32 tokens are multiples of 1/16 in (-16,
    16), so every RHT chunk sum is exact in fp32 and the summation order cannot matter (the
    RHT note of tests/test_kernels_quant.py); bf16/fp16 values are exact that way anyway."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(sum(counts), k, generator=g) * 2
    if dtype == torch.float32:
        x = torch.randint(-255, 256, x.shape, generator=g) / 16
    x = x.to(dtype).to(DEV)
    seeds = torch.randint(0, 2**31 - 1, (len(counts),), generator=g).to(DEV)
    offs = torch.tensor(counts).cumsum(0).to(torch.int32).to(DEV)
    return x, seeds, group_layout(offs, x.shape[0], 16)


def _twin(x, lay, sr: bool, seeds):
    """The PyTorch twin's row view of x and column view (RHT) of its padded layout, with the
    hash bytes of ``quant.grouped`` (also returned, for the kernel)."""
    rg, cg = lay.row_groups(), lay.col_groups()
    rb = segment_sr_bytes(rg, lay.starts, lay.counts, tuple(x.shape), "rows", seeds) \
        if sr else None
    cb = segment_sr_bytes(cg, lay.pad_starts, lay.pad_counts, (x.shape[1], lay.bound), "cols",
                          seeds + 1) if sr else None
    row = quantize_segments(x, QFormat.NVFP4, {"stochastic": sr, "rand_bits": rb}, rg,
                            lay.starts, lay.counts, "rows", None, None, None)
    col = quantize_segments(lay.pad(x).t().contiguous(), QFormat.NVFP4,
                            {"rht": True, "stochastic": sr, "rand_bits": cb}, cg,
                            lay.pad_starts, lay.pad_counts, "cols", None, None, None)
    return (row, col), (rb, cb)


@pytest.mark.parametrize("counts,m", [([5, 0, 37, 20], 16), ([0] * 7 + [3] + [40] * 25, 16),
                                      ([130, 0, 1], 128), ([0, 0], 32)])
def test_layout_kernel_equals_group_layout(counts, m):
    """One launch gives quant.grouped.group_layout's tables and col_groups() (E not a power of
    two, more experts than a block's width, empty ones, a token multiple of 128, no tokens)
    and zeroed amax buffers."""
    offs = torch.tensor(counts).cumsum(0).to(torch.int32).to(DEV)
    lay = group_layout(offs, sum(counts), m)
    tab, amax_r, amax_c = group_tables(offs, m, lay.bound)
    e = len(counts)
    want = torch.cat([lay.starts, lay.pad_starts, lay.counts, lay.pad_counts, lay.col_groups()])
    assert torch.equal(tab.long(), want)
    assert not amax_r.any() and not amax_c.any() and amax_r.shape == (e,)


@pytest.mark.parametrize("dtype,counts,k", [
    (torch.bfloat16, [5, 0, 37, 20], 48),        # an empty expert, a partial column tile
    (torch.float16, [130, 0, 3, 70], 64),        # tiles across three experts
    (torch.float32, [300, 10], 32),              # a tile inside one expert (one atomic), one across
])
def test_kernel_equals_pytorch_twin(dtype, counts, k):
    """RNE and SR with the twin's bytes, both views at once (x) and split (dy: SR rows); a
    NaN marks its block; every output, amax included, bit for bit."""
    x, seeds, lay = _setup(counts, k, dtype)
    x[3, 7] = float("nan")
    x[min(150, x.shape[0] - 1), 5] = 9.0
    for sr in (False, True):
        want, (rb, cb) = _twin(x, lay, sr, seeds)
        mode = 1 if sr else 0
        got = quantize_nvfp4_grouped_views(x, lay.offs, 16, (False, mode, None, rb),
                                           (True, mode, None, cb))
        for view, g, w in zip(("row", "col"), got, want):
            for a, b in zip(g, w):
                assert torch.equal(_bits(a), _bits(b)), (dtype, sr, view)


def test_amax_pairs_same_bits(monkeypatch):
    """The amax pass's RHT ending in pair maxima (``CONFIG['AMAX_PAIRS']``) gives the twin's
    bits, amaxes included, with a NaN, a 3e38 and the usual values, RNE and SR."""
    from microscale.kernels import quant_nvfp4_grouped_reg as reg
    x, seeds, lay = _setup([130, 0, 3, 70], 64, torch.bfloat16, seed=2)
    x[3, 7] = float("nan")
    x[140, 9] = 3.0e38
    for pairs in (False, True):
        monkeypatch.setitem(reg.CONFIG, "AMAX_PAIRS", pairs)
        for sr in (False, True):
            want, (rb, cb) = _twin(x, lay, sr, seeds)
            got = quantize_nvfp4_grouped_views(x, lay.offs, 16, (False, int(sr), None, rb),
                                               (True, int(sr), None, cb))
            for view, g, w in zip(("row", "col"), got, want):
                for a, b in zip(g, w):
                    assert torch.equal(_bits(a), _bits(b)), (pairs, sr, view)


def test_views_alone_equal_the_pair():
    """A row view alone and a column view alone give the pair's outputs (their own launches
    and amax passes)."""
    x, seeds, lay = _setup([40, 9, 0, 23], 32, torch.bfloat16, seed=1)
    pair = quantize_nvfp4_grouped_views(x, lay.offs, 16, (False, 2, seeds, None),
                                        (True, 2, seeds + 1, None))
    row = quantize_nvfp4_grouped_views(x, lay.offs, 16, (False, 2, seeds, None), None)
    col = quantize_nvfp4_grouped_views(x, lay.offs, 16, None, (True, 2, seeds + 1, None))
    assert row[1] is None and col[0] is None
    for a, b in zip(pair[0] + pair[1], row[0] + col[1]):
        assert torch.equal(_bits(a), _bits(b))


def test_philox_per_expert_equals_the_dense_kernels():
    """In-kernel Philox: each expert's codes equal the dense Triton quantizer's on that
    expert's tokens alone (zero-padded to 16, as ms.Linear pads them) with the expert's seed:
    the row view keyed by it, the column view by it + 1. A wrong expert's seed fails."""
    from microscale.kernels.quant_nvfp4 import quantize_rowcol_nvfp4_triton
    counts = [21, 0, 50, 16]
    x, seeds, lay = _setup(counts, 48, torch.bfloat16, seed=2)
    got = quantize_nvfp4_grouped_views(x, lay.offs, 16, (False, 2, seeds, None),
                                       (True, 2, seeds + 1, None))
    starts, ps, pc = lay.starts.tolist(), lay.pad_starts.tolist(), lay.pad_counts.tolist()
    for e, c in enumerate(counts):
        if c == 0:
            continue
        x_e = x.new_zeros(pc[e], x.shape[1])
        x_e[:c] = x[starts[e]:starts[e] + c]
        for sd, same in ((seeds[e:e + 1], True), (seeds[(e + 1) % 4:(e + 1) % 4 + 1], False)):
            opts = {"stochastic": True, "seed": sd, "check_finite": False}
            q_r, q_c = quantize_rowcol_nvfp4_triton(x_e, (QFormat.NVFP4, opts),
                                                    (QFormat.NVFP4, opts | {"rht": True}))
            rows, cols = slice(starts[e], starts[e] + c), slice(ps[e], ps[e] + pc[e])
            eq = [torch.equal(_bits(got[0][0][rows]), _bits(q_r.data[:c])),
                  torch.equal(_bits(got[0][1][rows]), _bits(q_r.scale[:c])),
                  torch.equal(got[1][0][:, cols.start // 2:cols.stop // 2], q_c.data),
                  torch.equal(_bits(got[1][1][:, cols.start // 16:cols.stop // 16]),
                              _bits(q_c.scale)),
                  float(got[0][2][e]) == float(q_r.amax), float(got[1][2][e]) == float(q_c.amax)]
            assert all(eq) if same else not (eq[0] and eq[2]), (e, same, eq)
    tail = slice(lay.pad_ends[-1].item() // 2, None)          # columns past the last expert
    assert not got[1][0][:, tail].any()


def test_sync_free_op_takes_the_kernel_and_says_so(monkeypatch):
    """quantize_grouped_fast sends the nvfp4 recipe's views here (explain names it) and, with
    the switch off, to the older per-view path; given bytes, both equal the reference."""
    from microscale.recipe import Recipe
    recipe = Recipe.from_name("nvfp4")
    counts = [5, 0, 37, 16]
    x, seeds, lay = _setup(counts, 32, torch.bfloat16, seed=3)
    views = [(op.format, op.quantize_kwargs() | {"check_finite": False})
             for op in (recipe.dgrad.a, recipe.wgrad.a)]
    (want_r, want_c), (rb, cb) = _twin(x, lay, True, seeds)
    for on in (True, False):
        monkeypatch.setitem(fast.CONFIG, "NVFP4_REG", on)
        got = fast.quantize_grouped_fast(x, lay.offs, *views, 16, seeds, rb, cb, None, None,
                                         "triton")
        note = ms.explain()[("quantize_grouped", "nvfp4|nvfp4")]
        assert ("register layout" in note) == on, note
        for g, w in zip(got, (want_r, want_c)):
            for a, b in zip(g, w):
                assert torch.equal(_bits(a), _bits(b)), on


@pytest.mark.parametrize("sr", [False, True])
def test_expanded_views_equal_the_reference(sr):
    """``"expand"`` (as nn.grouped asks for the GEMMs' A operands): the register kernel writes
    the row view as bf16 value · block scale; a column view asked for expanded is decoded
    after the kernel. Both equal the reference's expanded views bit for bit, scales and amax
    included."""
    from microscale.ops_grouped import quantize_grouped_reference
    counts = [5, 0, 37, 16]
    x, seeds, lay = _setup(counts, 32, torch.bfloat16, seed=4)
    (_, _), (rb, cb) = _twin(x, lay, sr, seeds)
    opts = {"stochastic": sr, "check_finite": False, "expand": True}
    views = [(QFormat.NVFP4, dict(opts)), (QFormat.NVFP4, dict(opts, rht=True))]
    got = fast.quantize_grouped_fast(x, lay.offs, *views, 16, seeds, rb, cb, None, None,
                                     "triton")
    want = quantize_grouped_reference(x, lay.offs, *views, 16, seeds, rb, cb, None, None)
    for g, w in zip(got, want):
        assert g[0].dtype == torch.bfloat16 and g[0].shape == w[0].shape
        for a, b in zip(g, w):
            assert torch.equal(_bits(a), _bits(b)), sr
