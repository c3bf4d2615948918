"""``ms.weight_cache``: weights quantized once per optimizer step under gradient accumulation,
with bit-identical results, checked staleness and no recompilation under ``torch.compile``."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from bitwise import same_values  # (tests/ is on sys.path)

import microscale as ms
from microscale import ops_many
from microscale.nn import function

PRESETS = ["nvfp4", "fp8_blockwise", "mxfp8", "fp8_tensorwise", "mxfp4"]


def _layer(recipe: str, seed: int = 0) -> ms.Linear:
    torch.manual_seed(seed)
    return ms.Linear(128, 256, recipe=recipe)


def _accumulate(layer, batches, cached: bool, seed: int = 7):
    """Two micro-batches, gradients accumulated; SR seeds drawn from one fixed generator."""
    layer.zero_grad()
    ys, dxs = [], []
    torch.manual_seed(seed)
    with ms.weight_cache(layer) if cached else _null():
        for x in batches:
            x = x.clone().requires_grad_(True)
            y = layer(x)
            (y.float() * torch.linspace(-1, 1, y.shape[-1])).sum().backward()
            ys.append(y.detach())
            dxs.append(x.grad)
    return ys, dxs, layer.weight.grad.clone()


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("recipe", PRESETS)
def test_cached_weights_give_the_same_bits(recipe):
    batches = [torch.randn(64, 128, dtype=torch.bfloat16) for _ in range(2)]
    plain = _accumulate(_layer(recipe), batches, cached=False)
    cached = _accumulate(_layer(recipe), batches, cached=True)
    for a, b in zip(plain[0] + plain[1] + [plain[2]], cached[0] + cached[1] + [cached[2]]):
        assert torch.equal(a, b)


def test_weights_are_quantized_once_per_block(monkeypatch):
    layer = _layer("fp8_blockwise")
    calls = []
    real = function._views

    def counting(t2d, *args, **kwargs):
        calls.append(t2d is layer.weight)
        return real(t2d, *args, **kwargs)

    real_many = ops_many.quantize_views_many

    def counting_many(xs, *args, **kwargs):
        calls.extend(x is layer.weight for x in xs)
        return real_many(xs, *args, **kwargs)

    monkeypatch.setattr(function, "_views", counting)
    monkeypatch.setattr(ops_many, "quantize_views_many", counting_many)
    batches = [torch.randn(32, 128) for _ in range(3)]
    _accumulate(layer, batches, cached=False)
    assert sum(calls) == 3                       # one W quantization per micro-batch
    calls.clear()
    _accumulate(layer, batches, cached=True)
    assert sum(calls) == 1                       # one for the whole step (the many-weight op)
    assert layer._weight_cache is None           # dropped when the block ends


def test_a_weight_changed_inside_the_block_is_an_error():
    layer = _layer("nvfp4_no_sr")
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    with pytest.raises(RuntimeError, match="changed inside"):
        with ms.weight_cache(layer):
            layer(torch.randn(16, 128)).sum().backward()
            opt.step()
    assert layer._weight_cache is None


def test_delayed_weight_history_advances_once_per_block():
    layer = _layer("fp8_delayed")
    hist = layer.delayed_state()["fprop.b/history"]
    with ms.weight_cache(layer):
        for _ in range(3):
            layer(torch.randn(16, 128)).sum().backward()
    filled = int((hist != 0).sum())
    plain = _layer("fp8_delayed")
    for _ in range(3):
        plain(torch.randn(16, 128)).sum().backward()
    assert filled == 1 and int((plain.delayed_state()["fprop.b/history"] != 0).sum()) == 3


def test_a_precision_switch_inside_the_block_quantizes_per_call():
    layer = _layer("fp8_blockwise")
    x = torch.randn(16, 128)
    with ms.weight_cache(layer):
        layer.hp_fprop = True                    # the plan changes: the cache does not apply
        y = layer(x)
    layer.hp_fprop = True
    assert torch.equal(y, layer(x))


def test_compiled_layer_uses_the_cache_without_recompiling():
    torch._dynamo.reset()
    layer = _layer("fp8_blockwise")
    run = torch.compile(layer, backend="aot_eager", fullgraph=True)
    x = torch.randn(64, 128)
    eager = layer(x)
    with torch._dynamo.config.patch(recompile_limit=1):
        for _ in range(2):                       # a new block: new cached tensors, same graph
            with ms.weight_cache(layer):
                assert torch.equal(run(x), eager)
    torch._dynamo.reset()


def test_bad_arguments():
    with pytest.raises(TypeError, match="nn.Module"):
        with ms.weight_cache("model"):
            pass


def _fp8_model(backend: str):
    torch.manual_seed(3)
    recipe = dataclasses.replace(ms.Recipe.parse("fp8_blockwise"), backend=backend)
    return torch.nn.Sequential(ms.Linear(256, 384, bias=False, recipe=recipe), torch.nn.GELU(),
                               ms.Linear(384, 128, bias=False, recipe=recipe),
                               ms.Linear(128, 256, bias=False,     # a group of its own
                                         recipe=dataclasses.replace(recipe, name="mxfp8",
                                                                    **_mx8_configs())))


def _mx8_configs() -> dict:
    mx = ms.Recipe.parse("mxfp8")
    return {g: getattr(mx, g) for g in ("fprop", "dgrad", "wgrad")}


def _cached_equals_plain(make_model, x: torch.Tensor, check_cache) -> None:
    """A model's outputs and gradients uncached and inside ms.weight_cache (``check_cache``
    looks at the cache first): equal bit for bit (SR seeds drawn from one fixed state)."""
    runs = []
    for cached in (False, True):
        model = make_model()
        xi = x.clone().requires_grad_(True)
        torch.manual_seed(11)
        with ms.weight_cache(model) if cached else _null():
            if cached:
                check_cache(model)
            y = model(xi)
            (y.float() * torch.linspace(-1, 1, y.shape[-1])).sum().backward()
        runs.append([y, xi.grad] + [p.grad for p in model.parameters()])
    for a, b in zip(*runs):
        assert torch.equal(a, b)


@pytest.mark.parametrize("backend", ["reference", "triton"])
def test_fp8_weights_quantized_together_give_the_same_bits(backend):
    """fp8_blockwise: the 128x128 weight pairs of all layers come from one many-tensor call
    (the Triton kernel under the interpreter, or the reference); a layer of another recipe is
    quantized on its own; outputs and gradients equal the uncached run bit for bit."""
    def check(model):
        assert [m._weight_cache[1].scale.shape for m in model.modules()
                if isinstance(m, ms.Linear)][:2] == [(3, 2), (1, 3)]

    _cached_equals_plain(lambda: _fp8_model(backend), torch.randn(96, 256, dtype=torch.bfloat16),
                         check)
    if backend == "triton":
        assert ms.explain()[("quantize_rowcol_many", "fp8_block|fp8_block")] == \
            "triton (one launch, the register pair kernel's 128x128 tile)"


def test_many_kernel_matches_the_reference_on_edges():
    """The many-tensor FP8 kernel = quantize_rowcol per tensor, with NaN, ±Inf, fp16/fp32/bf16
    inputs and tensors of different shapes in one call."""
    from microscale.ops_many import quantize_views_many
    g = torch.Generator().manual_seed(5)
    view = (ms.QFormat.FP8_BLOCK, {"block": (128, 128), "check_finite": False})
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        xs = [(torch.randn(r, c, generator=g) * 3).to(dtype) for r, c in
              ((128, 256), (384, 128), (256, 256))]
        xs[1][5, 7], xs[1][200, 3] = float("nan"), float("inf")
        xs[2][0, 0] = -float("inf")
        got = quantize_views_many(xs, view, view, "triton")
        for x, (q_row, q_col) in zip(xs, got):
            r_row, r_col = ms.quantize_rowcol(x, view, view, backend="reference")
            for q, r in ((q_row, r_row), (q_col, r_col)):
                assert torch.equal(q.data.view(torch.uint8), r.data.view(torch.uint8))
                assert torch.equal(q.scale, r.scale) and torch.equal(q.amax, r.amax)
    with pytest.raises(ValueError, match="not supported"):
        quantize_views_many([torch.randn(100, 128)], view, view, "triton")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_many_kernel_matches_per_tensor_kernels():
    """At the 125m/1b weight shapes (fp32 masters): the many-tensor launch gives the bytes of
    quantize_rowcol's per-tensor kernel and of the reference, tensor by tensor."""
    from microscale.ops_many import quantize_views_many
    g = torch.Generator(device="cuda").manual_seed(2)
    view = (ms.QFormat.FP8_BLOCK, {"block": (128, 128), "check_finite": False})
    xs = [torch.randn(r, c, device="cuda", generator=g) * 0.02 for r, c in
          ((768, 768), (256, 768), (3072, 768), (768, 3072), (2048, 8192), (512, 2048))]
    xs[0][3, 5] = float("nan")
    for x, (q_row, q_col) in zip(xs, quantize_views_many(xs, view, view, "triton")):
        for be in ("triton", "reference"):
            r_row, r_col = ms.quantize_rowcol(x, view, view, backend=be)
            for q, r in ((q_row, r_row), (q_col, r_col)):
                assert torch.equal(q.data.view(torch.uint8), r.data.view(torch.uint8))
                assert torch.equal(q.scale, r.scale) and torch.equal(q.amax, r.amax)


def test_groups_weights_decides_where_one_launch_pays(monkeypatch):
    """The harness caches weights without gradient accumulation only when the many-tensor op
    takes two or more of them and they are small (launch-bound); never for other recipes."""
    import importlib
    wc = importlib.import_module("microscale.nn.weight_cache")   # (ms.nn.weight_cache: the fn)
    model = _fp8_model("reference")
    assert wc.groups_weights(model)
    monkeypatch.setitem(wc.CONFIG, "GROUP_MAX_MEAN_NUMEL", 1000)
    assert not wc.groups_weights(model)                  # large weights: per layer as before
    monkeypatch.undo()
    nv = torch.nn.Sequential(ms.Linear(128, 128, recipe="nvfp4"),
                             ms.Linear(128, 128, recipe="nvfp4"))
    assert wc.groups_weights(nv)         # NVFP4 16x16 weights too (session 56: +0.9% at 125m)
    monkeypatch.setitem(wc.CONFIG, "GROUP_FORMATS", frozenset({ms.QFormat.FP8_BLOCK}))
    assert not wc.groups_weights(nv)
    monkeypatch.undo()
    one = torch.nn.Sequential(ms.Linear(128, 128, recipe="fp8_blockwise"))
    assert not wc.groups_weights(one)


def _nvfp4_model(backend: str, recipe: str = "nvfp4"):
    torch.manual_seed(4)
    r = dataclasses.replace(ms.Recipe.parse(recipe), backend=backend)
    return torch.nn.Sequential(ms.Linear(128, 96, bias=False, recipe=r), torch.nn.GELU(),
                               ms.Linear(96, 144, bias=False, recipe=r), torch.nn.GELU(),
                               ms.Linear(144, 128, bias=False, recipe="fp8_tensorwise"))


@pytest.mark.parametrize("backend", ["reference", "triton"])
@pytest.mark.slow
def test_nvfp4_weights_quantized_together_give_the_same_bits(backend):
    """nvfp4: the 16x16 weights of all layers come from one many-tensor call, each W once,
    expanded, Wᵀ its transpose (partial [32, 64] kernel tiles at 96 and 144); outputs and
    gradients equal the uncached run's (one expanded view per forward) bit for bit."""
    def check(model):
        q_w, q_wt = model[0]._weight_cache[1:]
        assert q_w.expanded and q_w.data.shape == (96, 128)
        assert torch.equal(q_wt.data.view(torch.int16), q_w.data.t().view(torch.int16))

    _cached_equals_plain(lambda: _nvfp4_model(backend), torch.randn(32, 128, dtype=torch.bfloat16),
                         check)
    if backend == "triton":
        assert ms.explain()[("quantize_rowcol_many", "nvfp4|none")] == "triton"


def _misaligned(x: torch.Tensor) -> torch.Tensor:
    """``x`` copied to an address 4 bytes past a 16-byte boundary (contiguous)."""
    buf = torch.empty(x.numel() + 8, dtype=x.dtype)
    start = next(k for k in range(1, 8) if (buf.data_ptr() + k * x.element_size()) % 16 == 4)
    out = buf[start:start + x.numel()].view(x.shape)
    out.copy_(x)
    return out


@pytest.mark.parametrize("how", ["aligned", "table", "misaligned"])
def test_nvfp4_many_kernel_matches_the_reference_on_edges(how, monkeypatch):
    """The many-tensor NVFP4 kernel = quantize_rowcol (16x16, expanded) per tensor and the
    reference, with NaN, ±Inf, an all-zero tensor, fp32/bf16 inputs, partial tiles; its
    aligned launch (the amax pass's runs of tiles spanning tensors: two programs here), the
    table-addressed one (``CONFIG["ALIGNED"]`` off), and an input off 16 bytes (table)."""
    from microscale.kernels import quant_many_nvfp4
    from microscale.ops import quantize_views
    from microscale.ops_many import quantize_views_many
    monkeypatch.setitem(quant_many_nvfp4.CONFIG, "ALIGNED", how != "table")
    g = torch.Generator().manual_seed(6)
    view = (ms.QFormat.NVFP4, {"block_2d": True, "check_finite": False})
    for dtype in (torch.float32, torch.bfloat16):
        xs = [(torch.randn(r, c, generator=g) * 3).to(dtype) for r, c in
              ((32, 64), (48, 80), (16, 16), (64, 32))]
        if how == "misaligned":
            xs[2] = _misaligned(xs[2])
        xs[1][5, 7], xs[1][40, 3] = float("nan"), float("inf")
        xs[0][0, 0] = -float("inf")
        xs[3].zero_()
        got = quantize_views_many(xs, view, view, "triton")
        for x, (q_w, q_wt) in zip(xs, got):
            assert torch.equal(q_wt.data.view(torch.int16), q_w.data.t().view(torch.int16))
            # Wᵀ's scale bytes, written by the op: those of quantizing xᵀ (SPEC §3)
            r_t, _ = quantize_views(x.t().contiguous(), (view[0], {**view[1], "expand": True}),
                                    None, "reference")
            assert q_wt.shape == r_t.shape and same_values(q_wt.data, r_t.data)
            assert torch.equal(q_wt.scale.view(torch.uint8), r_t.scale.view(torch.uint8))
            for be in ("triton", "reference"):
                r_w, _ = quantize_views(x, (view[0], {**view[1], "expand": True}), None, be)
                assert same_values(q_w.data, r_w.data)
                assert torch.equal(q_w.scale.view(torch.uint8), r_w.scale.view(torch.uint8))
                assert torch.equal(q_w.amax, r_w.amax)
    with pytest.raises(ValueError, match="not supported"):
        quantize_views_many([torch.randn(24, 32)], view, view, "triton")
    sr = (ms.QFormat.NVFP4, {"block_2d": True, "stochastic": True})
    with pytest.raises(ValueError, match="not supported"):
        quantize_views_many([torch.randn(32, 32)], sr, sr, "triton")


@pytest.mark.parametrize("in_kernel", [True, False])
def test_nvfp4_many_kernel_writes_the_transposes_scales(in_kernel, monkeypatch):
    """Wᵀ's scale bytes come from the kernel (``T_SCALES_MAX_BYTES``), or else are copied per
    weight straight into the op's output after it; never a transpose a weight afterwards
    (``QuantizedTensor.t()``: the weight cache's fill before session 55)."""
    from microscale import tensor
    from microscale.kernels import quant_many_nvfp4
    from microscale.ops_many import quantize_views_many
    if not in_kernel:
        monkeypatch.setitem(quant_many_nvfp4.CONFIG, "T_SCALES_MAX_BYTES", 0)
    calls, into = [], []
    real = tensor.transpose_tile_scales
    monkeypatch.setattr(tensor, "transpose_tile_scales",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(quant_many_nvfp4, "transpose_tile_scales",
                        lambda *a, out: into.append(out) or real(*a, out=out))
    view = (ms.QFormat.NVFP4, {"block_2d": True, "check_finite": False})
    xs = [torch.randn(32, 48), torch.randn(64, 16)]
    got = quantize_views_many(xs, view, view, "triton")
    assert not calls and [q_wt.shape for _, q_wt in got] == [(48, 32), (16, 64)]
    assert len(into) == (0 if in_kernel else len(xs))          # one copy a weight, in place
    for q_w, q_wt in got:
        assert torch.equal(q_wt.scale.view(torch.uint8), real(q_w.scale, 16).view(torch.uint8))


@pytest.mark.parametrize("backend", ["reference", "triton"])
def test_nvfp4_many_op_schema_and_fake(backend):
    """The op's NVFP4 outputs (expanded bf16 W, scale bytes, two empty column outputs, amaxes)
    match its fake implementation (what torch.compile traces) and its schema (no aliasing)."""
    from microscale.op_specs import view_spec
    spec = view_spec(ms.QFormat.NVFP4, {"block_2d": True, "check_finite": False, "expand": True})
    xs = [torch.randn(32, 64), torch.randn(48, 16)]
    torch.library.opcheck(torch.ops.microscale.quantize_rowcol_many.default,
                          (xs, spec, "", backend), test_utils=("test_schema", "test_faketensor"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("t_in_kernel", [True, False])
def test_gpu_nvfp4_many_kernel_matches_per_tensor_kernels(t_in_kernel, monkeypatch):
    """At the 125m/1b weight shapes (fp32 masters): the two many-tensor launches give each W
    the bytes of quantize_rowcol's per-tensor kernels and of the reference, and Wᵀ's scale
    bytes written by the kernel or copied after it (``T_SCALES_MAX_BYTES``)."""
    from microscale.kernels import quant_many_nvfp4
    from microscale.ops import quantize_views
    from microscale.ops_many import quantize_views_many
    monkeypatch.setitem(quant_many_nvfp4.CONFIG, "T_SCALES_MAX_BYTES", 1 << 40 if t_in_kernel
                        else 0)
    g = torch.Generator(device="cuda").manual_seed(2)
    view = (ms.QFormat.NVFP4, {"block_2d": True, "check_finite": False})
    xs = [torch.randn(r, c, device="cuda", generator=g) * 0.02 for r, c in
          ((768, 768), (256, 768), (3072, 768), (768, 3072), (2048, 8192), (48, 2064))]
    xs[0][3, 5] = float("nan")
    for x, (q_w, q_wt) in zip(xs, quantize_views_many(xs, view, view, "triton")):
        for be in ("triton", "reference"):
            r_w, _ = quantize_views(x, (view[0], {**view[1], "expand": True}), None, be)
            assert same_values(q_w.data, r_w.data)
            assert torch.equal(q_w.scale.view(torch.uint8), r_w.scale.view(torch.uint8))
            assert torch.equal(q_w.amax, r_w.amax)
            assert torch.equal(q_wt.scale.view(torch.uint8),
                               r_w.t().scale.view(torch.uint8))      # Wᵀ's, from the op


def test_many_kernel_says_which_tile_code_ran(monkeypatch):
    """The FP8 many op's path names the tile code it ran, and why the slower one (the same bits
    from both)."""
    from microscale.kernels import quant_many
    from microscale.ops_many import quantize_views_many
    view = (ms.QFormat.FP8_BLOCK, {"block": (128, 128), "check_finite": False})
    xs = [torch.randn(128, 256), torch.randn(256, 128)]
    key = ("quantize_rowcol_many", "fp8_block|fp8_block")
    reg = quantize_views_many(xs, view, view, "triton")
    assert ms.explain()[key] == "triton (one launch, the register pair kernel's 128x128 tile)"
    monkeypatch.setitem(quant_many.CONFIG, "KERNEL", "tile")
    tile = quantize_views_many(xs, view, view, "triton")
    assert "the 128x128 tile code: quant_many.CONFIG['KERNEL'] = 'tile'" in ms.explain()[key]
    monkeypatch.undo()
    not_pow2 = (ms.QFormat.FP8_BLOCK, view[1] | {"pow2_scales": False})
    quantize_views_many(xs, not_pow2, not_pow2, "triton")
    assert "power-of-two scales only" in ms.explain()[key]
    for a, b in zip(reg, tile, strict=True):
        for qa, qb in zip(a, b, strict=True):
            assert torch.equal(qa.data.view(torch.uint8), qb.data.view(torch.uint8))
            assert torch.equal(qa.scale, qb.scale) and torch.equal(qa.amax, qb.amax)
