"""ms.Linear: each GEMM equals ms.scaled_mm on the operands the recipe names, built here
independently from ms.quantize; SR statistics; gradient flow; shapes, dtypes, state, compile."""

from __future__ import annotations

import copy
import io
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import microscale as ms
from microscale.nn.linear import saved_activation_bytes
from microscale.recipe import PRESETS, Recipe

PRESET_NAMES = list(PRESETS)


def _dims(recipe: Recipe) -> tuple[int, int]:
    """(in, out) the recipe tiles: 128-multiples for FP8 128×128, else 64 × 96."""
    need = recipe.required_multiples()
    return (128, 256) if need["in"] == 128 else (64, 96)


def _q(t: torch.Tensor, op, scale=None) -> ms.QuantizedTensor:
    """Quantize ``t`` the way an operand config says (SR off in these tests)."""
    kw = op.quantize_kwargs()
    if op.delayed:                         # a fresh delayed-scaling history starts at scale 1
        kw["scale"] = torch.tensor(1.0) if scale is None else scale
    return ms.quantize(t, op.format, backend="reference", **kw)


def _pad(t2d: torch.Tensor, multiple: int) -> torch.Tensor:
    return F.pad(t2d, (0, 0, 0, -t2d.shape[0] % multiple))


def _expected(recipe: Recipe, x2d, w, b, dy2d):
    """y, dx, dW from ms.quantize + ms.scaled_mm (or the bf16 matmul for unquantized GEMMs)."""
    t, cd = x2d.shape[0], recipe.compute_dtype
    mult = recipe.required_multiples()["tokens"]
    xp, dyp = _pad(x2d, mult), _pad(dy2d, mult)
    fp, dg, wg = recipe.fprop, recipe.dgrad, recipe.wgrad
    if fp.quantized:
        y = ms.scaled_mm(_q(xp, fp.a), _q(w, fp.b), out_dtype=x2d.dtype)[:t]
    else:
        y = (x2d.to(cd) @ w.to(cd).t()).to(x2d.dtype)
    y = y + b.to(y.dtype)
    if dg.quantized:   # Wᵀ quantized afresh: for 2D tiles the layer's q_w.t() must equal it
        dx = ms.scaled_mm(_q(dyp, dg.a), _q(w.t().contiguous(), dg.b), out_dtype=x2d.dtype)[:t]
    else:
        dx = (dy2d.to(cd) @ w.to(cd)).to(x2d.dtype)
    if wg.quantized:
        dw = ms.scaled_mm(_q(dyp.t().contiguous(), wg.a), _q(xp.t().contiguous(), wg.b))
    else:
        dw = (dy2d.to(cd).t() @ x2d.to(cd)).float()
    return y, dx, dw


@pytest.mark.parametrize("name", PRESET_NAMES)
@pytest.mark.parametrize("lead", [(40,), (2, 24)], ids=["2d-40tok", "3d-48tok"])
def test_gemms_match_scaled_mm_of_recipe_operands(name, lead):
    recipe = Recipe.from_name(name).without_sr()
    n_in, n_out = _dims(recipe)
    torch.manual_seed(0)
    layer = ms.Linear(n_in, n_out, recipe=recipe)
    x = torch.randn(*lead, n_in, requires_grad=True)
    dy = torch.randn(*lead, n_out)
    y = layer(x)
    y.backward(dy)
    y_ref, dx_ref, dw_ref = _expected(recipe, x.detach().reshape(-1, n_in), layer.weight.detach(),
                                      layer.bias.detach(), dy.reshape(-1, n_out))
    assert y.shape == (*lead, n_out) and y.dtype == x.dtype
    torch.testing.assert_close(y.reshape(-1, n_out), y_ref, rtol=0, atol=0)
    torch.testing.assert_close(x.grad.reshape(-1, n_in), dx_ref, rtol=0, atol=0)
    assert layer.weight.grad.dtype == torch.float32 and layer.bias.grad.dtype == torch.float32
    torch.testing.assert_close(layer.weight.grad, dw_ref, rtol=0, atol=0)
    torch.testing.assert_close(layer.bias.grad, dy.reshape(-1, n_out).sum(0), rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("name", ["nvfp4", "mxfp8", "fp8_blockwise"])
def test_bf16_input_keeps_dtypes(name):
    recipe = Recipe.from_name(name).without_sr()
    n_in, n_out = _dims(recipe)
    torch.manual_seed(1)
    layer = ms.Linear(n_in, n_out, recipe=recipe)
    x = torch.randn(33, n_in, dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(33, n_out, dtype=torch.bfloat16)
    y = layer(x)
    y.backward(dy)
    y_ref, dx_ref, dw_ref = _expected(recipe, x.detach(), layer.weight.detach(),
                                      layer.bias.detach(), dy)
    assert y.dtype == x.grad.dtype == torch.bfloat16 and layer.weight.grad.dtype == torch.float32
    torch.testing.assert_close(y, y_ref, rtol=0, atol=0)
    torch.testing.assert_close(x.grad, dx_ref, rtol=0, atol=0)
    torch.testing.assert_close(layer.weight.grad, dw_ref, rtol=0, atol=0)


def test_autocast_casts_input_and_stays_exact():
    torch.manual_seed(10)
    layer = ms.Linear(64, 32, recipe="nvfp4_no_sr")
    x = torch.randn(16, 64)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = layer(x.clone().requires_grad_(True))
    assert y.dtype == torch.bfloat16
    assert torch.equal(y, layer(x.bfloat16()))


def _grads(layer, x, dy, seed):
    torch.manual_seed(seed)
    layer.zero_grad(set_to_none=True)
    xg = x.detach().clone().requires_grad_(True)
    layer(xg).backward(dy)
    return xg.grad, layer.weight.grad.clone()


@pytest.mark.parametrize("name", ["nvfp4", "mxfp4"])
def test_stochastic_rounding_mean_converges(name):
    """SR on dy is unbiased: the mean gradient over seeds tends to the GEMM with dy *unrounded*
    (W and x still quantized as the recipe says), and lands within RNE's error of SR-off."""
    recipe = Recipe.from_name(name)
    torch.manual_seed(2)
    layer = ms.Linear(64, 64, recipe=recipe, bias=False)
    x, dy = torch.randn(32, 64), torch.randn(32, 64)
    w = layer.weight.detach()
    ref = ms.Linear(64, 64, recipe=recipe.without_sr(), bias=False)
    ref.weight.data.copy_(w)
    off = _grads(ref, x, dy, 0)
    # E[SR(dy)] = dy, so the expected gradients keep only the other operand's quantization
    q_wt = _q(w.t().contiguous(), recipe.dgrad.b)
    q_xt = _q(x.t().contiguous(), recipe.wgrad.b)
    dyt_rot = ms.rht(dy.t().contiguous(), recipe.wgrad.a.rht)
    target = (dy @ q_wt.dequantize().t(), dyt_rot @ q_xt.dequantize(undo_rht=False).t())
    draws = [_grads(layer, x, dy, seed) for seed in range(48)]
    for a, b in zip(draws[0], _grads(layer, x, dy, 0)):     # same seed -> same gradients
        assert torch.equal(a, b)
    for k in range(2):
        samples = torch.stack([d[k] for d in draws])
        rel = lambda g: ((g - target[k]).norm() / target[k].norm()).item()  # noqa: E731
        assert samples.std(0).mean() > 0                                    # SR is random
        assert rel(samples.mean(0)) < 0.3 * rel(samples[0]), k               # ~ 1/sqrt(48)
        assert rel(samples.mean(0)) < 0.5 * rel(off[k]), k                   # no RNE bias
        close_to_off = (samples.mean(0) - off[k]).norm() / off[k].norm()
        assert close_to_off < 1.5 * rel(off[k]), k                           # ~ SR-off value


def test_layer_generator_reproducible():
    recipe = Recipe.from_name("nvfp4")
    x, dy = torch.randn(32, 32), torch.randn(32, 32)
    grads = []
    for _ in range(2):
        torch.manual_seed(3)
        layer = ms.Linear(32, 32, recipe=recipe, generator=torch.Generator().manual_seed(7))
        torch.manual_seed(99)                # the global RNG must not matter
        xg = x.clone().requires_grad_(True)
        layer(xg).backward(dy)
        grads.append(xg.grad)
        torch.rand(5)
    assert torch.equal(*grads)


def _cos(a, b):
    return F.cosine_similarity(a.flatten().double(), b.flatten().double(), dim=0).item()


def test_gradient_flow_mlp():
    torch.manual_seed(4)
    ref = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))
    model = nn.Sequential(*[ms.Linear.from_linear(m, "nvfp4") if isinstance(m, nn.Linear) else m
                            for m in ref])
    x = torch.randn(4, 8, 32)
    outs = [m(x).square().mean() for m in (ref, model)]
    for o in outs:
        o.backward()
    for p_ref, p in zip(ref.parameters(), model.parameters()):
        assert p.grad is not None and torch.isfinite(p.grad).all()
        assert _cos(p.grad, p_ref.grad) > 0.9
    # a few SGD steps reduce the loss
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    target = x @ torch.randn(32, 32) / 6              # a learnable map
    losses = []
    for _ in range(20):
        loss = F.mse_loss(model(x), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]


class TinyBlock(nn.Module):
    """Pre-norm transformer block: causal attention + MLP, every projection a Linear."""

    def __init__(self, d: int, heads: int, linear):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = linear(d, 3 * d), linear(d, d)
        self.fc1, self.fc2 = linear(d, 4 * d), linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


def test_gradient_flow_transformer_block():
    torch.manual_seed(5)
    ref = TinyBlock(32, 2, nn.Linear)
    blk = TinyBlock(32, 2, lambda i, o: ms.Linear(i, o, recipe="nvfp4"))
    blk.load_state_dict(ref.state_dict(), strict=False)
    x = torch.randn(2, 16, 32)
    xs = [x.clone().requires_grad_(True) for _ in range(2)]
    for m, xi in zip((ref, blk), xs):
        m(xi).square().mean().backward()
    assert _cos(xs[0].grad, xs[1].grad) > 0.9
    for (n, p_ref), p in zip(ref.named_parameters(), blk.parameters()):
        assert p.grad is not None and torch.isfinite(p.grad).all(), n
        assert _cos(p.grad, p_ref.grad) > 0.85, n


def test_3d_equals_2d_and_no_bias():
    torch.manual_seed(6)
    layer = ms.Linear(32, 48, bias=False, recipe="nvfp4_no_sr")
    assert layer.bias is None
    x = torch.randn(3, 16, 32)
    x3, x2 = x.clone().requires_grad_(True), x.reshape(48, 32).clone().requires_grad_(True)
    dy = torch.randn(3, 16, 48)
    layer(x3).backward(dy)
    g3 = layer.weight.grad.clone()
    layer.weight.grad = None
    y2 = layer(x2)
    y2.backward(dy.reshape(48, 48))
    assert torch.equal(layer(x3).reshape(48, 48), y2)
    assert torch.equal(x3.grad.reshape(48, 32), x2.grad) and torch.equal(g3, layer.weight.grad)


def test_no_grad_and_frozen_weight():
    torch.manual_seed(7)
    layer = ms.Linear(32, 32, recipe="nvfp4_no_sr")
    x = torch.randn(16, 32)
    y = layer(x)
    with torch.no_grad():
        y_ng = layer(x)
    assert not y_ng.requires_grad and torch.equal(y, y_ng)
    layer.weight.requires_grad_(False)                 # dx only: wgrad is skipped
    xg = x.clone().requires_grad_(True)
    layer(xg).sum().backward()
    assert layer.weight.grad is None and xg.grad is not None and layer.bias.grad is not None


def test_state_dict_round_trip_recipe_and_delayed_history():
    torch.manual_seed(8)
    recipe = Recipe.from_name("fp8_delayed").with_operand("fprop", "a", history_len=16, margin=1)
    layer = ms.Linear(32, 32, recipe=recipe)
    for step in range(3):
        layer(torch.randn(8, 32) * (step + 1)).sum().backward()
    state = layer.delayed_state()
    hist = state["fprop.a/history"]
    assert hist.numel() == 16 and (hist[:3] > 0).all() and (hist[3:] == 0).all()
    sd = layer.state_dict()
    assert all(isinstance(v, torch.Tensor) for v in sd.values())      # tensors only
    buf = io.BytesIO()
    torch.save(sd, buf)
    buf.seek(0)
    fresh = ms.Linear(32, 32, recipe="nvfp4")          # a different recipe: the saved one wins
    fresh.load_state_dict(torch.load(buf, weights_only=True))
    assert fresh.recipe == recipe
    assert set(fresh.delayed_state()) == set(state)
    for key, value in state.items():
        assert torch.equal(fresh.delayed_state()[key], value), key
    x = torch.randn(8, 32)
    assert torch.equal(fresh(x), layer(x))            # the next step uses the same scales


def test_old_dict_extra_state_still_loads():
    """State dicts written before the tensor form kept a dict (recipe JSON + delayed histories)."""
    layer = ms.Linear(32, 32, recipe="fp8_delayed")
    layer(torch.randn(8, 32)).sum().backward()
    sd = dict(layer.state_dict())
    live = layer.delayed_state()
    sd["_extra_state"] = {
        "recipe": layer.recipe.to_json(), "high_precision": False, "hp_fprop": True,
        "delayed": {role: {"amax_history": live[f"{role}/history"], "scale": live[f"{role}/scale"],
                           "steps": 1, "margin": 0, "history_len": 1024}
                    for role in ("fprop.a", "wgrad.a")}}
    fresh = ms.Linear(32, 32, recipe="nvfp4")
    fresh.load_state_dict(sd)
    assert fresh.recipe == layer.recipe and fresh.hp_fprop
    assert torch.equal(fresh.delayed_state()["fprop.a/history"], live["fprop.a/history"])
    assert torch.equal(fresh.delayed_state()["dgrad.a/history"], torch.zeros(1024))
    with pytest.raises(ValueError, match="not a microscale layer state"):
        fresh.set_extra_state(torch.zeros(8, dtype=torch.uint8))


def test_scales_follow_delayed_history():
    layer = ms.Linear(32, 32, recipe="fp8_delayed", bias=False)
    x = torch.randn(16, 32)
    layer(x)                                         # step 1: scale 1, records amax
    expected = ms.scaled_mm(_q(x, layer.recipe.fprop.a, torch.tensor(448.0) / x.abs().max()),
                            _q(layer.weight.detach(), layer.recipe.fprop.b,
                               torch.tensor(448.0) / layer.weight.detach().abs().max()))
    with torch.no_grad():
        assert torch.equal(layer(x), expected)


@pytest.mark.slow
def test_torch_compile_matches_eager():
    torch.manual_seed(9)
    model = nn.Sequential(ms.Linear(32, 64, recipe="nvfp4_no_sr"), nn.ReLU(),
                          ms.Linear(64, 32, recipe="nvfp4_no_sr"))
    x = torch.randn(16, 32)
    compiled = torch.compile(model)
    outs, grads = [], []
    for m in (model, compiled):
        xg = x.clone().requires_grad_(True)
        y = m(xg)
        y.square().sum().backward()
        outs.append(y.detach())
        grads.append((xg.grad, model[0].weight.grad.clone()))
        model.zero_grad()
    torch.testing.assert_close(outs[1], outs[0], rtol=0, atol=0)
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_fullgraph_compile_every_preset_matches_eager(name):
    """A converted block traces into one graph (no breaks) for every preset, and with SR off
    gives bit-identical outputs and gradients to eager (same ops, same kernels/references)."""
    torch._dynamo.reset()                 # one compile per preset: stay under the recompile limit
    recipe = Recipe.from_name(name).without_sr()
    n_in, n_out = _dims(recipe)
    torch.manual_seed(3)
    model = nn.Sequential(ms.Linear(n_in, n_out, recipe=recipe), nn.ReLU(),
                          ms.Linear(n_out, n_in, recipe=recipe, bias=False))
    twin = copy.deepcopy(model)           # the same start (delayed histories advance per call)
    x = torch.randn(2, 40, n_in)
    results = []
    for m, run in ((model, model), (twin, torch.compile(twin, fullgraph=True, backend="aot_eager"))):
        for _ in range(2):                # the second call runs with the updated state
            xg = x.clone().requires_grad_(True)
            y = run(xg)
            y.square().sum().backward()
        results.append([y.detach(), xg.grad, m[0].weight.grad, m[2].weight.grad])
    for eager, compiled in zip(*results):
        torch.testing.assert_close(compiled, eager, rtol=0, atol=0)


def test_fullgraph_compile_with_sr_and_delayed_state():
    """SR seeds and the delayed-scaling histories (updated in forward and in backward) trace
    too; the histories advance exactly as in eager."""
    torch.manual_seed(4)
    layers = [ms.Linear(64, 64, recipe="fp8_delayed") for _ in range(2)]
    layers[1].load_state_dict(layers[0].state_dict())
    compiled = torch.compile(layers[1], fullgraph=True, backend="aot_eager")
    for step in range(2):
        x = torch.randn(32, 64) * (step + 1)
        for run in (layers[0], compiled):
            run(x.clone().requires_grad_(True)).sum().backward()
    for key, value in layers[0].delayed_state().items():
        assert torch.equal(layers[1].delayed_state()[key], value), key
    sr = torch.compile(ms.Linear(64, 64, recipe="nvfp4"), fullgraph=True, backend="aot_eager")
    xg = torch.randn(32, 64, requires_grad=True)
    sr(xg).sum().backward()
    assert torch.isfinite(xg.grad).all()


@pytest.mark.parametrize("recipe, xt, element", [
    ("nvfp4", "auto", 2 + 1 / 16), ("nvfp4", False, 0.5 + 1 / 16),
    ("mxfp4", "auto", 0.5 + 1 / 32), ("mxfp8", "auto", 2 + 1 / 32), ("mxfp8", False, 1 + 1 / 32)])
def test_saved_activations_are_quantized(recipe, xt, element, monkeypatch):
    """The tensors autograd keeps are xᵀ's quantized view (+ constant weight state), not x:
    codes and block scales, or the bf16 expanded view (the block values the wgrad GEMM decodes
    to) where EXPAND_XT says so ("auto", the default: NVFP4, and MXFP8 in layers this narrow); the
    accounting agrees, bytes per token of a 64-wide input."""
    from microscale.nn import function
    monkeypatch.setitem(function.CONFIG, "EXPAND_XT", xt)
    layer = ms.Linear(64, 64, recipe=recipe)
    sizes = {}
    for tokens in (64, 128):
        saved = []
        x = torch.randn(tokens, 64, requires_grad=True)

        def pack(t):
            saved.append(t.numel() * t.element_size())
            return t
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            layer(x)
        sizes[tokens] = sum(saved)
    per_token = (sizes[128] - sizes[64]) / 64
    assert per_token == saved_activation_bytes(recipe, 64, 128) / 128 - 4 / 128 \
        == 64 * element
    assert saved_activation_bytes("nvfp4", 64, 128, expanded=False) / 128 - 4 / 128 \
        == 64 * 0.5625
    assert saved_activation_bytes("bf16", 4096, 1) == 8192
    assert saved_activation_bytes("nvfp4", 4096, 16, expanded=False) / 16 == \
        pytest.approx(2304 + 0.25)


@pytest.mark.parametrize("args, match", [
    ((100, 64), r"in_features=100 is not a multiple of 16.*keep_high_precision"),
    ((64, 40), r"out_features=40 is not a multiple of 16"),
])
def test_untileable_sizes_raise(args, match):
    with pytest.raises(ValueError, match=match):
        ms.Linear(*args, recipe="nvfp4")
    ms.Linear(*args, recipe="bf16")                   # high precision takes any size


def test_bad_inputs():
    layer = ms.Linear(32, 16, recipe="nvfp4")
    with pytest.raises(TypeError, match="float64"):
        layer(torch.randn(4, 32, dtype=torch.float64))
    with pytest.raises(TypeError, match="int64"):
        layer(torch.ones(4, 32, dtype=torch.long))
    with pytest.raises(ValueError, match=r"expected input \[\.\.\., 32\]"):
        layer(torch.randn(4, 16))
    with pytest.raises(ValueError, match="unknown recipe"):
        ms.Linear(32, 16, recipe="nvfp3")
    with pytest.raises(TypeError, match="recipe must be"):
        ms.Linear(32, 16, recipe=3)
    with pytest.raises(TypeError, match="nn.Linear"):
        ms.Linear.from_linear(nn.Conv1d(3, 3, 1), "nvfp4")


def test_from_linear_copies_and_zero_tokens():
    lin = nn.Linear(64, 32)
    layer = ms.Linear.from_linear(lin, "mxfp8")
    assert torch.equal(layer.weight, lin.weight) and torch.equal(layer.bias, lin.bias)
    assert layer.weight.data_ptr() != lin.weight.data_ptr()
    assert "recipe=mxfp8" in repr(layer)
    x0 = torch.randn(0, 64, requires_grad=True)
    y = layer(x0)
    y.sum().backward()
    assert y.shape == (0, 32) and x0.grad.shape == (0, 64)
    with torch.no_grad():
        assert math.isfinite(float(layer(torch.randn(2, 64)).sum()))


# ------------------------------------------------------------------------------ CUDA
@pytest.mark.gpu
@pytest.mark.parametrize("name", PRESET_NAMES)
def test_cuda_layer_matches_cpu_reference(name):
    """On CUDA the layer dispatches to the kernels ("auto"); y, dx, dW match the CPU reference
    up to summation order (SPEC §6 tolerance 8e-3, relative to each tensor's scale)."""
    recipe = Recipe.from_name(name).without_sr()
    n_in, n_out = (256, 384) if recipe.required_multiples()["in"] == 128 else (192, 320)
    torch.manual_seed(11)
    cpu = ms.Linear(n_in, n_out, recipe=recipe)
    gpu = ms.Linear(n_in, n_out, recipe=recipe, device="cuda")
    gpu.load_state_dict(cpu.state_dict())
    x = torch.randn(4, 50, n_in, dtype=torch.bfloat16)
    dy = torch.randn(4, 50, n_out, dtype=torch.bfloat16)
    results = []
    for layer, dev in ((cpu, "cpu"), (gpu, "cuda")):
        xg = x.to(dev).detach().clone().requires_grad_(True)
        y = layer(xg)
        y.backward(dy.to(dev))
        results.append([t.detach().float().cpu() for t in (y, xg.grad, layer.weight.grad)])
    for ref, got in zip(*results):
        torch.testing.assert_close(got, ref, rtol=8e-3, atol=8e-3 * float(ref.abs().max()))


@pytest.mark.gpu
def test_cuda_sr_generator_and_delayed_state():
    gen = torch.Generator(device="cuda").manual_seed(0)
    layer = ms.Linear(64, 64, recipe="nvfp4", device="cuda", generator=gen)
    x = torch.randn(32, 64, device="cuda", requires_grad=True)
    layer(x).sum().backward()
    assert x.grad.is_cuda and torch.isfinite(x.grad).all()
    delayed = ms.Linear(64, 64, recipe="fp8_delayed", device="cuda")
    for _ in range(2):
        delayed(torch.randn(32, 64, device="cuda", requires_grad=True)).sum().backward()
    history = delayed.delayed_state()["fprop.a/history"]
    assert history.is_cuda and history[:2].gt(0).all()
