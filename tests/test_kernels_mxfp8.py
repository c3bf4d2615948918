"""MXFP8 on FP8 tensor cores (kernels/gemm_mxfp8.py), the value-preserving scale regrouping
(quant/mx_regroup.py), the block-scaled dispatch (kernels/gemm_block.py) and its per-shape
table (kernels/gemm_paths.py).

In Triton's interpreter the kernel's FP8 products are exact and its sums fp32, so it must
match ``gemm.scaled_mm_reference`` to fp32 rounding; ``gpu`` tests run real shapes at the
SPEC tolerance (Hopper's FP8 MMA sums a 32..BK-long chain with ~14 bits below its top term).
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

import microscale as ms
from microscale import backend
from microscale.backend import KernelUnsupported
from microscale.gemm import scaled_mm_reference
from microscale.quant.mx_regroup import regroup_mx_reference, shift_codes_down

from kernel_env import (DEV, E4, E5, HAS_CUDA, INTERPRET, RUNS, TOL,  # (tests/ is on sys.path)
                        needs_kernels)

if RUNS:
    from microscale.kernels import gemm_block, gemm_mxfp8, gemm_paths
    from microscale.kernels.gemm_mxfp8 import MXFP8Config


def _q(shape, fmt, seed, scale=1.0, device=DEV):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale
    return ms.quantize(x.to(device), fmt, backend="reference")


def _rel(y, ref):
    return ((y.float() - ref.float()).norm() / ref.float().norm()).item()


def _bytes(q):
    return q.data.view(torch.uint8), q.scale


# ----------------------------------------------------------------------------- regrouping
@pytest.mark.parametrize("dtype,mb", [(torch.float8_e4m3fn, 3), (torch.float8_e5m2, 2)])
def test_shift_codes_down_every_code(dtype, mb):
    """All 256 codes × shifts 0..20: 'exact' iff code·2^-d is representable, and then the
    shifted code holds exactly that value; NaN/Inf codes only stay put."""
    codes = torch.arange(256, dtype=torch.uint8)
    value = codes.view(dtype).float()
    finite = torch.isfinite(value)
    for d in range(21):
        shifted, exact = shift_codes_down(codes, torch.full((256,), d, dtype=torch.int32), mb)
        want = value * 2.0 ** -d
        representable = want.to(dtype).float() == want
        assert torch.equal(exact[finite], representable[finite]), d
        assert torch.equal(shifted.view(dtype).float()[exact & finite], want[exact & finite])
        assert d == 0 or not exact[~finite].any()


@pytest.mark.parametrize("fmt", [E4, E5])
def test_regroup_reference_keeps_values_and_unifies(fmt):
    q = _q((96, 512), fmt, 0, device="cpu")
    r = regroup_mx_reference(q, 128)
    assert torch.equal(r.dequantize(), q.dequantize())              # same values, bit for bit
    e = r.scale.view(96, -1, 4)
    assert (e.amax(-1) == e.amin(-1)).float().mean() > 0.95          # Gaussian: ~99.9%


@needs_kernels
@pytest.mark.parametrize("fmt", [E4, E5])
@pytest.mark.parametrize("rows,k,group", [(33, 256, 128), (40, 160, 64), (7, 96, 128)])
def test_regroup_kernel_matches_reference(fmt, rows, k, group):
    """Triton twin bit-exact (a partial last group regroups over the chunks it has)."""
    q = _q((rows, k), fmt, 1, scale=3.0)
    got = gemm_mxfp8.regroup_mx(q, group)
    assert torch.equal(got.dequantize(), q.dequantize())
    if k % group == 0:
        want = regroup_mx_reference(q, group)
        assert all(torch.equal(a, b) for a, b in zip(_bytes(got), _bytes(want)))


@needs_kernels
@pytest.mark.parametrize("regroup", [False, True])
def test_prepare_decodes_scales_exactly(regroup):
    """The fp32 scale bits the GEMM loads are e8m0_decode of the (regrouped) bytes, bit for bit
    (byte 0: the subnormal 2^-127; 0xFF: NaN)."""
    from microscale.formats import e8m0_decode
    q = _q((40, 160), E4, 18)
    scale = q.scale.clone()
    scale[0, :3] = torch.tensor([0, 255, 254], dtype=torch.uint8)
    q = replace(q, scale=scale)
    q2, bits = gemm_mxfp8.prepare_mx(q, 64, regroup)
    want = e8m0_decode(q2.scale)
    got = bits.view(torch.float32)
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    assert torch.equal(got[~torch.isnan(want)], want[~torch.isnan(want)])
    assert regroup or q2 is q


# ----------------------------------------------------------------------------- the GEMM kernel
CONFIGS = {
    "adaptive_regroup": {"bm": 16, "bn": 32, "ch": 4},
    "adaptive": {"bm": 32, "bn": 16, "ch": 2, "regroup": False},
    "per_chunk": {"bm": 16, "bn": 16, "ch": 4, "adaptive": False, "regroup": False},
    "one_chunk": {"bm": 16, "bn": 32, "ch": 1},
}


@needs_kernels
@pytest.mark.parametrize("fmts", [(E4, E4), (E5, E4), (E4, E5), (E5, E5)])
@pytest.mark.parametrize("cfg", sorted(CONFIGS))
@pytest.mark.parametrize("mnk", [(17, 33, 96), (40, 24, 160)])
def test_kernel_matches_reference(fmts, cfg, mnk):
    """Odd M/N, K a multiple of 32 but not of the K step, every format pairing and path."""
    m, n, k = mnk
    qa, qb = _q((m, k), fmts[0], 2), _q((n, k), fmts[1], 3, scale=0.1)
    y = gemm_mxfp8.scaled_mm_mxfp8_fp8(qa, qb, config=MXFP8Config(**CONFIGS[cfg]))
    ref = scaled_mm_reference(qa, qb)
    assert y.shape == (m, n) and y.dtype == torch.float32
    assert _rel(y, ref) < (1e-6 if DEV == "cpu" else TOL)


def _uniform_rows(rows, k, seed):
    """Rows whose every 32-block has the same top magnitude: one exponent per row, so every
    K step takes the one-chain path; half the rows then get one block 4x larger (a flush)."""
    x = torch.randn(rows, k, generator=torch.Generator().manual_seed(seed)).clamp(-2, 2)
    x.view(rows, -1, 32)[..., 0] = 2.5
    x[::2, 32:64] *= 4
    return x


@needs_kernels
@pytest.mark.parametrize("mixed", [False, True])
def test_one_chain_path_and_flushes(mixed):
    """Uniform scales (the cheap path at every K step) and scale changes inside a K step."""
    a, b = _uniform_rows(32, 256, 4), _uniform_rows(32, 256, 5)
    if not mixed:
        a[::2, 32:64] /= 4
        b[::2, 32:64] /= 4
    qa, qb = (ms.quantize(t.to(DEV), E4, backend="reference") for t in (a, b))
    assert (qa.scale.unique().numel() == 1) != mixed
    for cfg in (MXFP8Config(bm=16, bn=16, regroup=False), MXFP8Config(bm=16, bn=16)):
        y = gemm_mxfp8.scaled_mm_mxfp8_fp8(qa, qb, config=cfg)
        assert _rel(y, scaled_mm_reference(qa, qb)) < (1e-6 if DEV == "cpu" else TOL)


@needs_kernels
def test_nan_code_and_nan_scale_reach_the_output():
    qa, qb = _q((16, 64), E4, 6), _q((16, 64), E4, 7)
    data, scale = qa.data.view(torch.uint8).clone(), qa.scale.clone()
    data[3, 5] = 0x7F                      # an E4M3 NaN element
    scale[9, 1] = 0xFF                     # a NaN block scale
    qa = replace(qa, data=data.view(qa.data.dtype), scale=scale)
    ref = scaled_mm_reference(qa, qb)
    for adaptive in (True, False):
        y = gemm_mxfp8.scaled_mm_mxfp8_fp8(qa, qb, config=MXFP8Config(
            bm=16, bn=16, adaptive=adaptive, regroup=adaptive))
        assert torch.equal(torch.isnan(y), torch.isnan(ref)) and torch.isnan(y[3]).all()
        assert _rel(y[~torch.isnan(ref).any(1)], ref[~torch.isnan(ref).any(1)]) < 1e-5


@needs_kernels
def test_per_shape_default_config():
    """64x128 tiles, or 64x64 where 64x128 would not give every SM two CTAs (wgrad shapes)."""
    assert gemm_mxfp8.config_for(8192, 8192, 8192) == gemm_mxfp8.DEFAULT_CONFIG
    assert gemm_mxfp8.config_for(16384, 640, 2560) == gemm_mxfp8.DEFAULT_CONFIG
    assert gemm_mxfp8.config_for(640, 2560, 16384).bn == 64


@needs_kernels
def test_kernel_rejects_what_it_cannot_run():
    qa = _q((16, 64), E4, 8)
    with pytest.raises(KernelUnsupported):
        gemm_mxfp8.scaled_mm_mxfp8_fp8(qa, _q((16, 64), "mxfp4", 9))
    with pytest.raises(ValueError, match="ch"):
        gemm_mxfp8.scaled_mm_mxfp8_fp8(qa, qa, config=MXFP8Config(ch=3))


# ----------------------------------------------------------------------------- dispatch + table
_TC_RULE = {"family": "mxfp8", "m": [None, None], "n": [None, None], "k": [None, None],
            "path": "fp8"}


@needs_kernels
def test_dispatch_notes_the_path_and_forced_paths_agree():
    qa, qb = _q((24, 64), E5, 10), _q((40, 64), E4, 11)
    ref = scaled_mm_reference(qa, qb)
    gemm_paths.set_table([_TC_RULE])
    try:
        y = ms.scaled_mm(qa, qb, backend="triton")
    finally:
        gemm_paths.set_table(None)
    assert "FP8 tensor cores" in backend.explain()[("scaled_mm", "mxfp8_e5m2xmxfp8_e4m3")]
    assert _rel(y, ref) < TOL
    for path in ("dequant", "mainloop"):
        y = gemm_block.scaled_mm_block(qa, qb, path=path)
        assert _rel(y, ref) < TOL
    with pytest.raises(KernelUnsupported):        # no Blackwell here: native refuses
        gemm_block.scaled_mm_block(qa, qb, path="native")


def test_note_fallback_is_visible_and_strict_raises():
    backend.note_fallback("scaled_mm", "testxtest", "emulation", "why not")
    assert backend.explain()[("scaled_mm", "testxtest")] == "emulation (fallback: why not)"
    backend.set_strict(True)
    try:
        with pytest.raises(RuntimeError, match="strict"):
            backend.note_fallback("scaled_mm", "testxtest", "emulation", "why not")
    finally:
        backend.set_strict(False)


@needs_kernels
def test_path_table_defaults_rules_and_file(tmp_path, monkeypatch):
    choose = gemm_paths.choose_path
    assert choose("fp8", 8192, 640, 640)[0] == "torch"
    assert choose("fp4", 16384, 2560, 640)[0] == "dequant"
    assert choose("mxfp8", 16384, 2560, 640)[0] == "dequant"      # until measured on a GPU
    assert choose("mxfp8", 16384, 2560, 640, fp8_tensor_cores=False)[0] == "dequant"
    tc = {"family": "mxfp8", "m": [None, None], "n": [None, None], "k": [None, None],
          "path": "fp8"}
    try:
        gemm_paths.set_table([tc])
        assert choose("mxfp8", 16384, 2560, 640) == ("fp8", {}, "table rule 0")
        assert choose("mxfp8", 16384, 2560, 640, fp8_tensor_cores=False)[0] == "dequant"
    finally:
        gemm_paths.set_table(None)
    rule = {"family": "fp8", "m": [None, 16384], "n": [None, 1024], "k": [None, None],
            "path": "triton", "config": {"bm": 64}}
    try:
        gemm_paths.set_table([rule])
        assert choose("fp8", 8192, 640, 640) == ("triton", {"bm": 64}, "table rule 0")
        assert choose("fp8", 8192, 2048, 640)[0] == "torch"          # outside the rule
        with pytest.raises(ValueError, match="path"):
            gemm_paths.set_table([{**rule, "path": "cublas"}])
        f = tmp_path / "table.json"
        f.write_text(json.dumps([{**rule, "family": "mxfp8", "path": "dequant"}]))
        monkeypatch.setenv("MICROSCALE_GEMM_TABLE", str(f))
        gemm_paths.set_table(None)
        assert choose("mxfp8", 8192, 640, 640)[0] == "dequant"
    finally:
        monkeypatch.delenv("MICROSCALE_GEMM_TABLE", raising=False)
        gemm_paths.set_table(None)


# ----------------------------------------------------------------------------- GPU
gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not HAS_CUDA or INTERPRET, reason="needs CUDA (no interpreter)")


@gpu
@needs_cuda
@pytest.mark.parametrize("fmts", [(E4, E4), (E5, E4)])
@pytest.mark.parametrize("mnk", [(1024, 2048, 1024), (1000, 1152, 640), (4096, 640, 2560)])
def test_gpu_kernel(fmts, mnk):
    """Real shapes, both output dtypes, the default config (odd M and N included)."""
    m, n, k = mnk
    qa, qb = _q((m, k), fmts[0], 12, device="cuda"), _q((n, k), fmts[1], 13, device="cuda")
    ref = scaled_mm_reference(qa, qb)
    for out_dtype in (torch.float32, torch.bfloat16):
        y = gemm_mxfp8.scaled_mm_mxfp8_fp8(qa, qb, out_dtype)
        assert y.dtype == out_dtype and _rel(y, ref) < TOL


@gpu
@needs_cuda
def test_gpu_every_sweep_config():
    """Every config the benchmark sweeps compiles and is exact (one shape: compile time)."""
    qa, qb = _q((1000, 640), E4, 16, device="cuda"), _q((1152, 640), E4, 17, device="cuda")
    ref = scaled_mm_reference(qa, qb)
    for cfg in gemm_mxfp8.SWEEP_CONFIGS:
        assert _rel(gemm_mxfp8.scaled_mm_mxfp8_fp8(qa, qb, config=cfg), ref) < TOL, str(cfg)


@gpu
@needs_cuda
def test_gpu_dispatch_takes_the_fp8_kernel_on_hopper():
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("no FP8 tensor cores")
    qa, qb = _q((2048, 1024), E4, 14, device="cuda"), _q((1536, 1024), E4, 15, device="cuda")
    gemm_paths.set_table([_TC_RULE])          # the kernel is opt-in until measured
    try:
        y = ms.scaled_mm(qa, qb, out_dtype=torch.bfloat16)
    finally:
        gemm_paths.set_table(None)
    path = backend.explain()[("scaled_mm", "mxfp8_e4m3xmxfp8_e4m3")]
    assert "FP8 tensor cores" in path or "native" in path
    assert _rel(y, scaled_mm_reference(qa, qb)) < TOL
