"""The Gluon MXFP8 GEMM on Hopper's FP8 tensor cores (kernels/gemm_mxfp8_wgmma.py).

Its prepare pass is a ``tl`` kernel and runs in Triton's interpreter: bit-exact against the
reference regrouping, the fp32 scale decode and a torch twin of the one-exponent flags. The
GEMM itself is Gluon (``warpgroup_mma``: Hopper only, no interpreter); ``gpu`` tests check it
against ``gemm.scaled_mm_reference`` at the SPEC tolerance on every path it has (one chain per
K step, a chain per chunk, mixed), odd shapes, both output dtypes and NaN inputs.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import replace

import pytest
import torch

import microscale as ms
from microscale.formats import e8m0_decode
from microscale.gemm import scaled_mm_reference
from microscale.quant.mx_regroup import regroup_mx_reference

HAS_TRITON = importlib.util.find_spec("triton") is not None
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
HAS_CUDA = torch.cuda.is_available()
RUNS = HAS_TRITON and (INTERPRET or HAS_CUDA)
needs_kernels = pytest.mark.skipif(not RUNS, reason="needs Triton and CUDA or TRITON_INTERPRET=1")
if RUNS:
    from microscale.kernels import gemm_mxfp8, gemm_mxfp8_wgmma
DEV = "cuda" if HAS_CUDA and not INTERPRET else "cpu"
TOL = 8e-3
E4, E5 = "mxfp8_e4m3", "mxfp8_e5m2"


def _q(x, fmt=E4, device=DEV):
    return ms.quantize(x.to(device), fmt, backend="reference")


def _randn(rows, k, seed, scale=1.0):
    return torch.randn(rows, k, generator=torch.Generator().manual_seed(seed)) * scale


def _flags_reference(scale: torch.Tensor, block_rows: int, padded_rows: int = 0) -> torch.Tensor:
    """1 per (row block, K step of 4 chunks) where every row has one exponent over the
    step's chunks inside K (rows past the end, up to ``padded_rows``, count as uniform)."""
    rows, ks = scale.shape
    steps = -(-ks // 4)
    blocks = -(-max(rows, padded_rows) // block_rows)
    e = torch.full((blocks * block_rows, steps * 4), -1, dtype=torch.int32)
    e[:rows, :ks] = scale.to(torch.int32)
    e = e.view(blocks * block_rows, steps, 4)
    first = e[..., :1]
    same = (e == first) | (e < 0)
    return same.all(-1).view(blocks, block_rows, steps).all(1).to(torch.int32)


@needs_kernels
@pytest.mark.parametrize("fmt", [E4, E5])
@pytest.mark.parametrize("rows,k,block_rows", [(200, 512, 128), (33, 160, 32), (128, 96, 64)])
def test_prepare_is_bit_exact(fmt, rows, k, block_rows):
    """Codes and scales as the reference regroups them; fp32 scales = e8m0_decode of those,
    K-step-major and zero-padded; flags as the torch twin. Outlier rows and a NaN scale make
    some blocks non-uniform."""
    x = _randn(rows, k, 20, 3.0)
    x[5, 40] = 3000.0                          # a block many binades up: no regroup there
    q = _q(x, fmt)
    scale = q.scale.clone()
    scale[min(9, rows - 1), 1] = 0xFF          # a NaN block scale
    q = replace(q, scale=scale)
    got, f, u = gemm_mxfp8.prepare_mx_wgmma(q, block_rows)
    assert torch.equal(got.dequantize().isnan(), q.dequantize().isnan())
    keep = ~q.dequantize().isnan()
    assert torch.equal(got.dequantize()[keep], q.dequantize()[keep])   # same values
    if k % 128 == 0:
        want = regroup_mx_reference(q, 128)
        assert torch.equal(got.data.view(torch.uint8), want.data.view(torch.uint8))
        assert torch.equal(got.scale, want.scale)
    ks, steps = k // 32, -(-k // 128)
    padded = -(-rows // 128) * 128
    assert f.shape == (4 * steps + 1, padded) and f.dtype == torch.float32
    dec = e8m0_decode(got.scale).t()
    fv = f[:ks, :rows]
    assert torch.equal(fv.isnan(), dec.isnan())
    assert torch.equal(fv[~dec.isnan()], dec[~dec.isnan()])
    pad = torch.ones_like(f, dtype=torch.bool)
    pad[:ks, :rows] = False
    assert (f[pad] == 0).all()
    assert torch.equal(u.cpu(), _flags_reference(got.scale.cpu(), block_rows, padded))
    assert u.sum() < u.numel()                   # the outlier's block is not uniform


def test_flags_reference_on_a_worked_case():
    """Two rows, 6 chunks (two K steps, the second partial): row 1 changes in chunk 2."""
    scale = torch.tensor([[127] * 6, [127, 127, 128, 128, 130, 130]], dtype=torch.uint8)
    assert _flags_reference(scale, 2).tolist() == [[0, 1]]
    assert _flags_reference(scale[:1], 1).tolist() == [[1, 1]]
    assert _flags_reference(scale, 1, 3).tolist() == [[1, 1], [0, 1], [1, 1]]


# ----------------------------------------------------------------------------- GPU
gpu = pytest.mark.gpu
on_hopper = pytest.mark.skipif(
    not (HAS_CUDA and not INTERPRET and HAS_TRITON
         and torch.cuda.get_device_capability()[0] == 9), reason="needs Hopper (9.x)")


def _outliers(rows, k, seed, every=7):
    """Gaussian rows with the second block of every K step 2^12 larger in every ``every``-th
    row: no 64-row block can share one exponent over a step (the other blocks' codes would
    lose bits: the per-chunk path)."""
    x = _randn(rows, k, seed)
    x.view(rows, -1, 128)[::every, :, 32:64] *= 4096.0
    return x


@gpu
@on_hopper
@pytest.mark.parametrize("fmts", [(E4, E4), (E5, E4), (E4, E5)])
@pytest.mark.parametrize("mnk", [(1024, 1024, 1024), (1000, 1152, 640), (300, 136, 96),
                                 (4096, 640, 2560)])
def test_gpu_kernel_matches_reference(fmts, mnk):
    """Odd M and N, K not a multiple of 128 (a partial last step), both output dtypes."""
    m, n, k = mnk
    qa, qb = _q(_randn(m, k, 1), fmts[0]), _q(_randn(n, k, 2, 0.05), fmts[1])
    ref = scaled_mm_reference(qa, qb)
    for out_dtype in (torch.float32, torch.bfloat16):
        y = gemm_mxfp8_wgmma.scaled_mm_mxfp8_wgmma(qa, qb, out_dtype)
        assert y.dtype == out_dtype and y.shape == (m, n)
        err = ((y.float() - ref).norm() / ref.norm()).item()
        assert err < TOL, (out_dtype, err)


@gpu
@on_hopper
@pytest.mark.parametrize("case", ["uniform", "a_per_chunk", "b_per_chunk", "mixed"])
def test_gpu_every_path(case):
    """Uniform data (every step one chain); outlier rows in every A block (a chain per chunk,
    both sides scaled); outliers in every B block with A uniform (a chain per chunk, B's
    scales summed first, A's applied once); outliers in some A blocks only (every path in one
    launch)."""
    m, n, k = 512, 384, 1024
    a = _outliers(m, k, 3) if case in ("a_per_chunk", "mixed") else _randn(m, k, 3)
    if case == "mixed":
        a[128:384] = _randn(256, k, 5)
    b = _outliers(n, k, 4) if case == "b_per_chunk" else _randn(n, k, 4)
    qa, qb = _q(a), _q(b)
    share_a = gemm_mxfp8.prepare_mx_wgmma(qa, gemm_mxfp8_wgmma.BM // 2)[2].float().mean().item()
    share_b = gemm_mxfp8.prepare_mx_wgmma(qb, gemm_mxfp8_wgmma.BN)[2].float().mean().item()
    assert {"uniform": share_a > 0.9 and share_b > 0.8,
            "a_per_chunk": share_a == 0.0 and share_b > 0.8,
            "b_per_chunk": share_a > 0.9 and share_b == 0.0,
            "mixed": 0.0 < share_a < 1.0 and share_b > 0.8}[case], (share_a, share_b)
    ref = scaled_mm_reference(qa, qb)
    y = gemm_mxfp8_wgmma.scaled_mm_mxfp8_wgmma(qa, qb)
    assert ((y - ref).norm() / ref.norm()).item() < TOL


@gpu
@on_hopper
def test_gpu_nan_code_and_nan_scale_reach_the_output():
    qa, qb = _q(_randn(256, 256, 6)), _q(_randn(128, 256, 7))
    data, scale = qa.data.view(torch.uint8).clone(), qa.scale.clone()
    data[3, 5] = 0x7F                      # an E4M3 NaN element
    scale[9, 1] = 0xFF                     # a NaN block scale
    qa = replace(qa, data=data.view(qa.data.dtype), scale=scale)
    ref = scaled_mm_reference(qa, qb)
    y = gemm_mxfp8_wgmma.scaled_mm_mxfp8_wgmma(qa, qb)
    assert torch.equal(torch.isnan(y), torch.isnan(ref)) and torch.isnan(y[3]).all()
    ok = ~torch.isnan(ref).any(1)
    assert ((y[ok] - ref[ok]).norm() / ref[ok].norm()).item() < TOL
