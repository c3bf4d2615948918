"""The Gluon MXFP8 GEMM on Hopper's FP8 tensor cores (kernels/gemm_mxfp8_wgmma.py).

Its prepare pass is a ``tl`` kernel and runs in Triton's interpreter: bit-exact against the
reference regrouping, the fp32 scale decode and a torch twin of the one-exponent flags. The
GEMM itself is Gluon (``warpgroup_mma``: Hopper only, no interpreter); ``gpu`` tests check it
against ``gemm.scaled_mm_reference`` at the SPEC tolerance on every path it has (one chain per
K step, a chain per chunk, mixed), odd shapes, both output dtypes and NaN inputs.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import microscale as ms
from microscale.formats import e8m0_decode
from microscale.gemm import scaled_mm_reference
from microscale.quant.mx_regroup import regroup_mx_reference

from kernel_env import (DEV, E4, E5, HAS_CUDA, HAS_TRITON, INTERPRET, RUNS, TOL,
                        needs_kernels)  # (tests/ is on sys.path)

if RUNS:
    from microscale.kernels import gemm_mxfp8, gemm_mxfp8_wgmma


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
    assert f.shape == (4 * steps, padded) and f.dtype == torch.float32
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


def _chains_emulated(prep_a, prep_b) -> torch.Tensor:
    """The kernel's arithmetic in torch, from ``prepare_mx_wgmma``'s outputs: per (64-row block
    of A, 128-row block of B, K step) one chain of the step's four chunks scaled by chunk 0's
    scales where both flags are set, else one chain per chunk with its own, summed in fp32."""
    (qa, fa, ua), (qb, fb, ub) = prep_a, prep_b
    a, b = qa.data.float(), qb.data.float()
    m, k = a.shape
    steps = ua.shape[1]
    pad = 128 * steps - k                                  # the TMA box's zero fill past K
    a = torch.nn.functional.pad(a, (0, pad)).view(m, steps, 4, 32)
    b = torch.nn.functional.pad(b, (0, pad)).view(b.shape[0], steps, 4, 32)
    part = torch.einsum("msck,nsck->scmn", a.double(), b.double())   # exact chunk products
    sa = fa[: 4 * steps, :m].double().view(steps, 4, m)
    sb = fb[: 4 * steps, : b.shape[0]].double().view(steps, 4, b.shape[0])
    ua_t = ua.repeat_interleave(64, 0)[:m].t()                         # [steps, m]
    ub_t = ub.repeat_interleave(128, 0)[: b.shape[0]].t()               # [steps, n]
    one = (ua_t[:, :, None] & ub_t[:, None, :]).bool()                  # [steps, m, n]
    chained = part.sum(1) * sa[:, 0, :, None] * sb[:, 0, None, :]
    chunked = (part * sa[:, :, :, None] * sb[:, :, None, :]).sum(1)
    return torch.where(one, chained, chunked).sum(0).float()


@needs_kernels
@pytest.mark.parametrize("mnk", [(200, 136, 96), (130, 256, 512)])
def test_chain_arithmetic_matches_reference(mnk):
    """The prepared operands, consumed as the kernel does (chunk 0's scales for a one-chain
    step, zero padding past K and past the rows), give the reference product: checks the
    prepare pass's outputs against the kernel's reading of them, on CPU."""
    m, n, k = mnk
    a, b = _outliers(m, k, 8, every=5), _randn(n, k, 9, 0.02)
    qa, qb = _q(a), _q(b)
    prep_a = gemm_mxfp8.prepare_mx_wgmma(qa, 64)
    prep_b = gemm_mxfp8.prepare_mx_wgmma(qb, 128)
    assert 0 < prep_b[2].float().mean() and prep_a[2].float().mean() < 1
    y = _chains_emulated(tuple(t.cpu() if torch.is_tensor(t) else t for t in prep_a),
                         tuple(t.cpu() if torch.is_tensor(t) else t for t in prep_b))
    ref = scaled_mm_reference(qa, qb).cpu()
    assert ((y - ref).norm() / ref.norm()).item() < 1e-6


_COMPILE_SM90 = """
import sys
sys.path.insert(0, {bench!r})
import sass_offline                  # the offline sm_90 build and the kernel's preset
if "mx8_wgmma" not in sass_offline.PRESETS:
    print("NO-GLUON"); sys.exit(0)
fn, sig, consts, warps, stages, _ = sass_offline.PRESETS["mx8_wgmma"]
try:
    ptx = sass_offline.compile_sm90(fn, sig, consts, warps, stages).asm["ptx"]
except RuntimeError as err:       # no ptxas for this Triton's PTX: the IR and PTX still built
    if "ptxas" not in str(err).lower():
        raise
    print("NO-PTXAS"); sys.exit(0)
print("WGMMA" if "wgmma.mma_async" in ptx else "", "TMA" if "cp.async.bulk.tensor" in ptx else "")
"""


@pytest.mark.skipif(not HAS_TRITON, reason="needs Triton")
def test_gluon_kernel_compiles_for_sm90():
    """The Gluon kernel builds for sm_90 with the installed Triton, no GPU needed (Gluon's API
    moved between Triton 3.6 and 3.9; the module resolves both): catches API drift in CI. A
    real compile needs a process without ``TRITON_INTERPRET`` (Triton's own library functions
    are interpreter objects in this one), hence the subprocess; it builds the kernel as
    ``benchmarks/sass_offline.py``'s ``mx8_wgmma`` preset does."""
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    bench = str(Path(__file__).resolve().parents[1] / "benchmarks")
    out = subprocess.run([sys.executable, "-c", _COMPILE_SM90.format(bench=bench)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    if "NO-GLUON" in out.stdout or "NO-PTXAS" in out.stdout:
        pytest.skip(out.stdout.strip())
    assert "WGMMA" in out.stdout and "TMA" in out.stdout, out.stdout


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
    for k0 in range(32, k, 128):
        x[::every, k0:k0 + 32] *= 4096.0
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
