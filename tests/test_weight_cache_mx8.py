"""MXFP8 weights quantized together (``ops_many`` / ``kernels.quant_many_mx``): one launch for
every W / Wᵀ pair of a model, written expanded where both GEMMs would decode them, with the
bits of ``quantize_rowcol`` tensor by tensor and of the uncached layers."""

from __future__ import annotations

import dataclasses
import importlib

import pytest
import torch

import microscale as ms
from microscale.ops_many import quantize_views_many, rowcol_many_reference
from test_weight_cache import _cached_equals_plain

wc = importlib.import_module("microscale.nn.weight_cache")   # (ms.nn.weight_cache: the fn)
E4M3, E5M2 = ms.QFormat.MXFP8_E4M3, ms.QFormat.MXFP8_E5M2


def _mx8_model(backend: str):
    torch.manual_seed(5)
    r = dataclasses.replace(ms.Recipe.parse("mxfp8"), backend=backend)
    return torch.nn.Sequential(ms.Linear(256, 384, bias=False, recipe=r), torch.nn.GELU(),
                               ms.Linear(384, 128, recipe=r), torch.nn.GELU(),
                               ms.Linear(128, 96, bias=False, recipe=r))   # 96: on its own


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int16) if t.dtype == torch.bfloat16 else t.view(torch.uint8)


def _diff(q, r) -> str:
    """What differs between two MXFP8 views ("" if nothing): the form, the data (bf16 NaN where
    NaN: the reference's expanded NaN is another payload), the scale bytes, the amax."""
    if q.expanded != r.expanded:
        return f"expanded {q.expanded} / {r.expanded}"
    nan = q.data.float().isnan()
    out = []
    if not torch.equal(nan, r.data.float().isnan()):
        out.append(f"NaN at {(nan != r.data.float().isnan()).nonzero()[:4].tolist()}")
    else:
        bad = (_bits(q.data) != _bits(r.data)) & ~nan
        if bad.any():
            at = bad.nonzero()[:4].tolist()
            out.append(f"data at {at}: {[q.data[i, j].item() for i, j in at]} / "
                       f"{[r.data[i, j].item() for i, j in at]}")
    if not torch.equal(q.scale, r.scale):
        out.append(f"scale at {(q.scale != r.scale).nonzero()[:4].tolist()}")
    if not torch.equal(q.amax, r.amax):
        out.append(f"amax {q.amax.item()} / {r.amax.item()}")
    return "; ".join(out)


def _same(q, r) -> bool:
    return not _diff(q, r)


@pytest.mark.parametrize("backend", ["reference", "triton"])
def test_mxfp8_weights_quantized_together_give_the_same_bits(backend):
    """mxfp8: the pairs of the two layers whose weights tile by 128 come from one many-tensor
    call, both views expanded (the GEMMs' operands off CUDA as on Hopper); the 96-row weight
    is quantized per layer; outputs and gradients equal the uncached run's bit for bit."""
    def check(model):
        q_w, q_wt = model[0]._weight_cache[1:]
        assert q_w.expanded and q_wt.expanded and q_w.data.dtype == torch.bfloat16
        assert q_w.data.shape == (384, 256) and q_wt.data.shape == (256, 384)
        assert q_wt.scale.shape == (256, 384 // 32)
        assert not model[4]._weight_cache[1].expanded

    _cached_equals_plain(lambda: _mx8_model(backend), torch.randn(64, 256, dtype=torch.bfloat16),
                         check)
    if backend == "triton":
        assert ms.explain()[("quantize_rowcol_many", "mxfp8_e4m3|mxfp8_e4m3")] == "triton"


def test_mx8_many_kernel_matches_the_reference_on_edges():
    """The many-tensor MXFP8 kernel = quantize_rowcol per tensor: codes or expanded, E4M3 and
    E5M2, ceil and floor scales, NaN, ±Inf and an all-zero tensor, fp32/bf16/fp16 inputs,
    tensors of different shapes in one call."""
    g = torch.Generator().manual_seed(8)
    for fmt, opts in ((E4M3, {}), (E5M2, {"expand": True}),
                      (E4M3, {"expand": True, "scale_rounding": "floor"})):
        view = (fmt, {"check_finite": False, **opts})
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            xs = [(torch.randn(r, c, generator=g) * 3).to(dtype) for r, c in
                  ((128, 256), (256, 128), (128, 128))]
            xs[1][5, 7], xs[1][200, 3], xs[0][0, 0] = float("nan"), float("inf"), -float("inf")
            xs[2].zero_()
            got = quantize_views_many(xs, view, view, "triton")
            ref = quantize_views_many(xs, view, view, "reference")
            for pair, ref_pair, x in zip(got, ref, xs):
                assert all(_same(q, r) for q, r in zip(pair, ref_pair)), (fmt, opts, dtype)
                plain = ms.quantize_rowcol(x, *[(v[0], {k: o for k, o in v[1].items()
                                                        if k != "expand"}) for v in (view,) * 2],
                                           backend="reference")
                for q, p in zip(pair, plain):
                    assert _same(q, p.expand() if opts.get("expand") else p)
    with pytest.raises(ValueError, match="not supported"):
        quantize_views_many([torch.randn(96, 128)], view, view, "triton")
    assert rowcol_many_reference([torch.zeros(128, 128)], view, view)[0].dtype == torch.bfloat16


@pytest.mark.parametrize("backend", ["reference", "triton"])
def test_mx8_many_op_schema_and_fake(backend):
    """The op's MXFP8 outputs (codes or expanded data, scale bytes, amaxes) match its fake
    implementation (what torch.compile traces) and its schema (no aliasing)."""
    from microscale.op_specs import view_spec
    xs = [torch.randn(128, 256), torch.randn(256, 128)]
    for opts in ({"check_finite": False}, {"check_finite": False, "expand": True}):
        spec = view_spec(E5M2, opts)
        torch.library.opcheck(torch.ops.microscale.quantize_rowcol_many.default,
                              (xs, spec, spec, backend),
                              test_utils=("test_schema", "test_faketensor"))


def test_mxfp8_grouping_and_expansion_rules(monkeypatch):
    """The harness groups small MXFP8 weights (CONFIG["GROUP_FORMATS"]); they are cached as
    codes where CONFIG["EXPAND_MXFP8"] is off, where the model's weights are large (mean over
    CONFIG["GROUP_MAX_MEAN_NUMEL"]), and where a GEMM path rule sends MXFP8 away from the dequantize
    path at their (n, k) (gemm_paths.dequant_at_every_m)."""
    from microscale.kernels import gemm_paths
    model = _mx8_model("reference")
    assert wc.groups_weights(model)
    monkeypatch.setitem(wc.CONFIG, "GROUP_FORMATS", frozenset({ms.QFormat.FP8_BLOCK}))
    assert not wc.groups_weights(model)
    monkeypatch.undo()
    cpu = torch.device("cpu")
    assert gemm_paths.dequant_at_every_m("mxfp8_e4m3", "mxfp8_e4m3", 384, 256, cpu)
    assert not gemm_paths.dequant_at_every_m("nvfp4", "nvfp4", 384, 256, cpu)
    gemm_paths.set_table([{"family": "mxfp8", "n": [384, 384], "path": "mainloop"}])
    try:
        assert not gemm_paths.dequant_at_every_m("mxfp8_e4m3", "mxfp8_e4m3", 384, 256, cpu)
        assert gemm_paths.dequant_at_every_m("mxfp8_e4m3", "mxfp8_e4m3", 256, 384, cpu)
    finally:
        gemm_paths.set_table(None)
    for knob, value in (("EXPAND_MXFP8", False), ("GROUP_MAX_MEAN_NUMEL", 1000)):
        # switched off, or large weights (as 1b's under gradient accumulation): codes, held
        # through the block at about half the bytes
        monkeypatch.setitem(wc.CONFIG, knob, value)
        with ms.weight_cache(model):
            q_w, q_wt = model[0]._weight_cache[1:]
            assert not q_w.expanded and not q_wt.expanded
            assert q_w.data.dtype == torch.float8_e4m3fn
        monkeypatch.undo()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_mx8_many_kernel_matches_per_tensor_kernels():
    """At the 125m/1b weight shapes (fp32 masters): the one launch gives the bytes of
    quantize_rowcol's per-tensor kernel and of the reference, codes and expanded."""
    g = torch.Generator(device="cuda").manual_seed(2)
    xs = [torch.randn(r, c, device="cuda", generator=g) * 0.02 for r, c in
          ((768, 768), (256, 768), (3072, 768), (768, 3072), (2048, 8192), (512, 2048))]
    xs[0][3, 5] = float("nan")
    for opts in ({"check_finite": False}, {"check_finite": False, "expand": True}):
        view = (E4M3, opts)
        base = (E4M3, {"check_finite": False})
        for x, pair in zip(xs, quantize_views_many(xs, view, view, "triton")):
            for be in ("triton", "reference"):
                ref = ms.quantize_rowcol(x, base, base, backend=be)
                for v, q, r in zip(("row", "col"), pair, ref):
                    diff = _diff(q, r.expand() if opts.get("expand") else r)
                    assert not diff, f"{tuple(x.shape)} {v} {opts} against {be}: {diff}"
