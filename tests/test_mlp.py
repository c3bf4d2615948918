"""relu2_mlp: the relu² MLP as one autograd node (the up projection's dy quantized from ds and u).

Same bits as ``down(relu(up(x))²)`` run as three modules (outputs, dx, both dW, the bias
gradient) for every preset it fuses and every one it does not, with and without the down
projection's recompute, on token counts that need padding; the kernels' fused prologues in
Triton's interpreter; the fallbacks say why; a fullgraph trace."""

import copy
import dataclasses
import os

import pytest
import torch
from torch import nn

import microscale as ms
from microscale.nn.mlp import relu2_mlp
from test_recompute import _saved_bytes    # bytes of what autograd keeps


def _layers(recipe, n_in=256, hidden=512, n_out=128, down_bias=True, recompute=None):
    torch.manual_seed(0)
    up = ms.Linear(n_in, hidden, bias=False, recipe=recipe)
    down = ms.Linear(hidden, n_out, bias=down_bias, recipe=recipe)
    down.recompute_input = recompute
    return up, down


def _run(up, down, x, grad, fused: bool):
    up, down = copy.deepcopy(up), copy.deepcopy(down)
    x = x.detach().clone().requires_grad_(x.requires_grad)
    torch.manual_seed(7)                                      # SR seeds, where a recipe has them
    y = relu2_mlp(x, up, down) if fused else down(torch.square(torch.relu(up(x))))
    y.backward(grad)
    out = [y.detach(), up.weight.grad, down.weight.grad]
    out += [x.grad] if x.requires_grad else []
    out += [down.bias.grad] if down.bias is not None else []
    return out


def _same_bits(up, down, tokens=(3, 50), x_grad=True, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(1)
    dev = up.weight.device
    x = torch.randn(*tokens, up.in_features, generator=g).to(dev, dtype).requires_grad_(x_grad)
    grad = torch.randn(*tokens, down.out_features, generator=g).to(dev, dtype)
    plain = _run(up, down, x, grad, False)
    fused = _run(up, down, x, grad, True)                  # last: ms.explain() tells of it
    assert len(fused) == len(plain)
    for a, b in zip(fused, plain, strict=True):
        assert a.dtype == b.dtype and torch.equal(a, b)


@pytest.mark.parametrize("recompute", [None, True, False])
@pytest.mark.parametrize("x_grad", [True, False])
@pytest.mark.parametrize("recipe", ["fp8_blockwise", "mxfp8", "nvfp4", "nvfp4_no_sr"])
def test_fused_same_bits_as_three_modules(recipe, recompute, x_grad):
    up, down = _layers(recipe, recompute=recompute)
    # 150 tokens: FP8 blockwise pads them to 256, NVFP4 to 160; MXFP8 fuses on whole
    # 128-token tiles
    _same_bits(up, down, tokens=(2, 128) if recipe == "mxfp8" else (3, 50), x_grad=x_grad)
    note = ms.explain()[("mlp", "relu2")]
    # these layers are under 2048 wide: the default (None) recomputes NVFP4's xᵀ only
    expect = recipe.startswith("nvfp4") if recompute is None else recompute
    assert note.startswith("fused") and ("recomputed" in note) == expect, note


@pytest.mark.parametrize("recipe", ["mxfp4", "fp8_tensorwise", "fp8_delayed"])
def test_unfused_recipes_same_bits_and_say_why(recipe):
    up, down = _layers(recipe)
    _same_bits(up, down)
    assert ms.explain()[("mlp", "relu2")].startswith("unfused: the up projection's dgrad.a")


def test_mxfp8_off_whole_tiles_runs_unfused():
    up, down = _layers("mxfp8")
    _same_bits(up, down, tokens=(2, 96))
    assert "not whole 128x128 tiles" in ms.explain()[("mlp", "relu2")]


def test_fp32_input_and_autocast():
    up, down = _layers("fp8_blockwise", down_bias=False)
    _same_bits(up, down, tokens=(130,), dtype=torch.float32)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 128, 256, generator=g)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a, b = relu2_mlp(x, up, down), down(torch.square(torch.relu(up(x))))
    assert a.dtype == b.dtype == torch.bfloat16 and torch.equal(a, b)


def test_fallbacks_say_why_and_keep_the_bits():
    up, down = _layers("fp8_blockwise")
    calls = []
    handle = up.register_forward_hook(lambda m, i, o: calls.append(o.shape))
    _same_bits(up, down)
    assert calls and ms.explain()[("mlp", "relu2")] == \
        "unfused: module hooks (each projection must run as its own call)"
    handle.remove()
    down.hp_fprop = True
    _same_bits(up, down)
    assert ms.explain()[("mlp", "relu2")] == "unfused: a precision switch is set"
    biased = ms.Linear(256, 512, bias=True, recipe="fp8_blockwise")
    _same_bits(biased, _layers("fp8_blockwise")[1])
    assert "bias" in ms.explain()[("mlp", "relu2")]
    plain_up, plain_down = nn.Linear(64, 96), nn.Linear(96, 32)      # the bf16 model: plain ops
    x = torch.randn(5, 64)
    assert torch.equal(relu2_mlp(x, plain_up, plain_down),
                       plain_down(torch.square(torch.relu(plain_up(x)))))
    up, down = _layers("fp8_blockwise")
    x = torch.randn(5, 256, dtype=torch.bfloat16)
    with torch.no_grad():                                             # no backward: two nodes
        assert torch.equal(relu2_mlp(x, up, down), down(torch.square(torch.relu(up(x)))))


def test_bad_arguments_raise():
    up = ms.Linear(256, 512, bias=False, recipe="fp8_blockwise")
    down = ms.Linear(384, 128, recipe="fp8_blockwise")
    x = torch.randn(4, 256, dtype=torch.bfloat16, requires_grad=True)
    with pytest.raises(ValueError, match="gives 512 features"):
        relu2_mlp(x, up, down)
    with pytest.raises(ValueError, match="expected input"):
        relu2_mlp(torch.randn(4, 255, requires_grad=True), up, _layers("fp8_blockwise")[1])


def test_keeps_u_not_more():
    """Fused, backward keeps u (bf16), x's column view, both Wᵀ views and (recompute off)
    relu(u)²'s column view: no more than the three modules keep."""
    up, down = _layers("fp8_blockwise", recompute=False)
    x = torch.randn(256, 256, dtype=torch.bfloat16, requires_grad=True)
    fused = _saved_bytes(lambda: relu2_mlp(x, up, down))
    plain = _saved_bytes(lambda: down(torch.square(torch.relu(up(x)))))
    assert fused <= plain
    down.recompute_input = True                     # relu(u)²'s view not kept: 256 x 512 codes
    assert _saved_bytes(lambda: relu2_mlp(x, up, down)) <= fused - 256 * 512


@pytest.mark.parametrize("recipe,recompute", [("fp8_blockwise", True), ("fp8_blockwise", False),
                                              ("mxfp8", False), ("mxfp8", True),
                                              ("nvfp4", True)])
@pytest.mark.slow
def test_fused_kernels_interpreted(recipe, recompute):
    """The FP8 / MXFP8 register pair kernels and NVFP4's reg pass (with its amax pass)
    applying ``relu_square`` (forward) and ``relu_square_grad`` (the up projection's dy pair)
    as they load, in Triton's interpreter: still the bits of the three modules on the same
    kernels. (NVFP4's x pair with ``relu_square`` in one launch, which recompute off would
    add, is ``test_recompute``'s prologue test.)"""
    pytest.importorskip("triton")
    from microscale.recipe import Recipe
    rec = dataclasses.replace(Recipe.parse(recipe), backend="triton")
    # (NVFP4: 96 tokens, masked tiles; narrower layers than the 128-wide FP8 / MX blocks need)
    width = 64 if recipe == "nvfp4" else 128
    up, down = _layers(rec, n_in=width, hidden=2 * width, n_out=width, recompute=recompute)
    _same_bits(up, down, tokens=(1, 96) if recipe == "nvfp4" else (2, 128))
    paths = ms.explain()
    fmt = {"fp8_blockwise": "fp8_block", "mxfp8": "mxfp8_e4m3"}.get(recipe, recipe)
    assert "relu_square_grad fused into its loads" in paths[("quantize_rowcol", f"{fmt}|{fmt}")]
    if recompute:              # forward's row view alone, backward's column view alone (NVFP4
        #                        weights' 16x16 views note "nvfp4|none" after forward's x)
        for key in (f"{fmt}|none", f"none|{fmt}")[fmt == "nvfp4":]:
            assert "relu_square fused into its loads" in paths[("quantize_rowcol", key)], key


@pytest.mark.parametrize("recipe", ["nvfp4", "nvfp4_no_sr"])
def test_du_in_dgrad_same_bits(recipe, monkeypatch):
    """``CONFIG["DU_IN_DGRAD"]``'s plumbing (forced here: off CUDA the rule is off, and the op
    applies ``relu_square_grad`` after the GEMM): the down projection's dgrad returns ``du``,
    the up projection quantizes it with no prologue, and every output and gradient keeps the
    three modules' bits, on token counts that pad."""
    from microscale.nn import mlp
    monkeypatch.setattr(mlp, "du_in_dgrad", lambda *a: True)
    calls, real = [], mlp.linear_grads
    monkeypatch.setattr(mlp, "linear_grads", lambda *a, **k: calls.append(
        (k.get("dx_epilogue") is not None, k.get("dy_prologue") is not None)) or real(*a, **k))
    up, down = _layers(recipe)
    _same_bits(up, down, tokens=(3, 50))
    assert calls == [(True, False), (False, False)]     # down: du out; up: no prologue


@pytest.mark.slow
@pytest.mark.parametrize("recipe,recompute", [("nvfp4", True), ("nvfp4", False),
                                              ("nvfp4_no_sr", True)])
def test_amaxes_from_the_gemms_same_bits(recipe, recompute, monkeypatch):
    """``CONFIG["DU_AMAX_IN_DGRAD"]`` and ``["U_AMAX_IN_FPROP"]``, the kernels in Triton's
    interpreter (the α GEMM forced on, as on CUDA): the up projection's fprop returns u and
    relu(u)²'s two NVFP4 amaxes, measured in its epilogue, which the down projection's x views
    (and backward's recomputed xᵀ) take as given; the down projection's dgrad returns du and
    its amaxes, which the up projection's dy pair takes. Two amax passes fewer, none measured
    after a GEMM, and every output and gradient keeps the three modules' bits."""
    pytest.importorskip("triton")
    from microscale.kernels import quant_nvfp4
    from microscale.nn import function, mlp
    from microscale.recipe import Recipe
    from microscale import ops_gemm
    from microscale.kernels import gemm_alpha
    monkeypatch.setattr(mlp, "du_in_dgrad", lambda *a: True)
    monkeypatch.setattr(function, "_alpha_in_kernel", lambda *a: True)
    monkeypatch.setattr(gemm_alpha, "alpha_epilogue", lambda *a: True)    # its pointer kernel
    after = []                                           # amaxes the op measured after a GEMM
    monkeypatch.setattr(ops_gemm, "out_amax_reference", lambda *a, _r=ops_gemm.out_amax_reference:
                        after.append(a[2]) or _r(*a))
    rec = dataclasses.replace(Recipe.parse(recipe), backend="triton")
    up, down = _layers(rec, n_in=64, hidden=128, n_out=64, recompute=recompute)
    counts, real = {}, {n: getattr(quant_nvfp4, n) for n in ("_reg_amax", "_given_pair")}
    for flag in (False, True):
        monkeypatch.setitem(mlp.CONFIG, "DU_AMAX_IN_DGRAD", flag)
        monkeypatch.setitem(mlp.CONFIG, "U_AMAX_IN_FPROP", flag)
        counts[flag] = seen = {"_reg_amax": 0, "_given_pair": 0}
        for name in real:
            monkeypatch.setattr(quant_nvfp4, name, lambda *a, _n=name, _s=seen: _s.__setitem__(
                _n, _s[_n] + 1) or real[_n](*a))
        _same_bits(up, down, tokens=(1, 96))
    assert counts[True]["_given_pair"] == counts[False]["_given_pair"] + 2, counts
    assert counts[True]["_reg_amax"] == counts[False]["_reg_amax"] - 2, counts
    assert after == [], after              # both measured in the α kernel's epilogue


def test_du_in_dgrad_rule():
    """On by default since session 28 (``MICROSCALE_DU_IN_DGRAD=0`` turns it off); it needs
    CUDA, the kernels and NVFP4's α GEMM for the dgrad."""
    from microscale.nn import mlp
    from microscale.nn.function import Plan
    plan = Plan(ms.Recipe.from_name("nvfp4"))
    dy = torch.zeros(64, 32, dtype=torch.bfloat16)
    assert mlp.CONFIG["DU_IN_DGRAD"] == (os.environ.get("MICROSCALE_DU_IN_DGRAD", "1") != "0")
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(mlp.CONFIG, "DU_IN_DGRAD", False)
        assert not mlp.du_in_dgrad(plan, dy, 128, torch.bfloat16)
        mp.setitem(mlp.CONFIG, "DU_IN_DGRAD", True)
        assert not mlp.du_in_dgrad(plan, dy, 128, torch.bfloat16)          # CPU
        assert not mlp.du_in_dgrad(Plan(ms.Recipe.from_name("mxfp8")), dy, 128, torch.bfloat16)


def _compiled_same_bits(up, down, x: torch.Tensor) -> None:
    """``relu2_mlp`` traced whole (``torch.compile(fullgraph=True)``, aot_eager) on a copy of
    the layers gives eager's output and gradients bit for bit."""
    mlp = nn.Module()
    mlp.up, mlp.down = up, down
    twin = copy.deepcopy(mlp)
    torch._dynamo.reset()
    run = torch.compile(lambda t: relu2_mlp(t, twin.up, twin.down), fullgraph=True,
                        backend="aot_eager")
    results = []
    for m, fn in ((mlp, lambda t: relu2_mlp(t, mlp.up, mlp.down)), (twin, run)):
        xg = x.clone().requires_grad_(True)
        y = fn(xg)
        y.float().square().sum().backward()
        results.append([y.detach(), xg.grad, m.up.weight.grad, m.down.weight.grad,
                        m.down.bias.grad])
    for eager, compiled in zip(*results):
        assert torch.equal(compiled, eager)


def test_fullgraph_trace_matches_eager():
    up, down = _layers("fp8_blockwise", n_in=128, hidden=256, n_out=128)
    _compiled_same_bits(up, down, torch.randn(3, 40, 128, dtype=torch.bfloat16))


def test_fullgraph_trace_with_gemm_amaxes(monkeypatch):
    """The GEMM-amax path (``microscale::scaled_mm_amax`` and its fake, the amaxes handed to
    the quantizers) traces whole with ``torch.compile(fullgraph=True)`` and gives eager's
    bits (forced on CPU, where the op measures the amaxes by the reference; SR off, whose
    backward draws differ under compile with or without this path, as the issue allows)."""
    from microscale.nn import function, mlp as mlp_mod
    monkeypatch.setattr(mlp_mod, "du_in_dgrad", lambda *a: True)
    monkeypatch.setattr(function, "_alpha_in_kernel", lambda *a: True)
    up, down = _layers("nvfp4_no_sr", n_in=64, hidden=128, n_out=64)
    _compiled_same_bits(up, down, torch.randn(2, 48, 64, dtype=torch.bfloat16))


@pytest.mark.gpu
@pytest.mark.parametrize("recipe,recompute", [("fp8_blockwise", True), ("fp8_blockwise", False),
                                              ("mxfp8", False), ("mxfp8", True),
                                              ("nvfp4", False), ("nvfp4", True),
                                              ("nvfp4_no_sr", False)])
def test_same_bits_on_cuda_with_the_kernels(recipe, recompute, monkeypatch):
    """At a 1b-like width ratio on the GPU: the fused node (pair kernels with the relu²
    prologues) = the three modules (Inductor-free eager relu², the plain pair kernel). NVFP4's
    ``du`` from the dgrad epilogue (``DU_IN_DGRAD``, on by default) is off here, so that the
    up projection's dy pair takes the prologue; the next test runs it on."""
    from microscale.nn import mlp
    monkeypatch.setitem(mlp.CONFIG, "DU_IN_DGRAD", False)
    torch.manual_seed(0)
    up = ms.Linear(512, 2048, bias=False, recipe=recipe, device="cuda")
    down = ms.Linear(2048, 512, bias=False, recipe=recipe, device="cuda")
    down.recompute_input = recompute
    # (FP8 blockwise pads 4000 tokens to 4096, NVFP4 to 4000; MXFP8 fuses on whole 128-token
    # tiles)
    _same_bits(up, down, tokens=(4, 1024) if recipe == "mxfp8" else (4, 1000))
    fmt = {"fp8_blockwise": "fp8_block", "mxfp8": "mxfp8_e4m3"}.get(recipe, "nvfp4")
    assert "relu_square_grad fused into its loads" in \
        ms.explain()[("quantize_rowcol", f"{fmt}|{fmt}")]


@pytest.mark.gpu
@pytest.mark.parametrize("recompute", [False, True])
def test_gpu_same_bits_with_wgrad_alpha_in_the_epilogue(recompute, monkeypatch):
    """Every weight gradient from NVFP4's α kernel (``EPILOGUE["fp32_min_tiles"]`` at 1): the
    fused node keeps the three modules' bits (session 33 saw this pair differ once with fp32
    outputs there, undiagnosed)."""
    from microscale.kernels import gemm_alpha, gemm_paths
    monkeypatch.setitem(gemm_paths.EPILOGUE, "fp32_min_tiles", 1)
    fp32_outs, real = [], gemm_alpha.alpha_mm
    monkeypatch.setattr(gemm_alpha, "alpha_mm", lambda *a, **k: fp32_outs.append(
        a[3] == torch.float32) or real(*a, **k))
    torch.manual_seed(0)
    up = ms.Linear(512, 2048, bias=False, recipe="nvfp4", device="cuda")
    down = ms.Linear(2048, 512, bias=False, recipe="nvfp4", device="cuda")
    down.recompute_input = recompute
    _same_bits(up, down, tokens=(4, 1000))
    assert fp32_outs.count(True) == 4, fp32_outs      # both weight gradients, both runs


@pytest.mark.gpu
@pytest.mark.parametrize("recipe,recompute", [("nvfp4", False), ("nvfp4", True),
                                              ("nvfp4_no_sr", False)])
def test_gpu_du_in_dgrad_same_bits(recipe, recompute, monkeypatch):
    """``CONFIG["DU_IN_DGRAD"]`` on the GPU: the down projection's dgrad (NVFP4's α GEMM)
    writes ``du`` in its epilogue (and measures du's amaxes there: ``DU_AMAX_IN_DGRAD``), and
    the step keeps the three modules' bits (with the down projection's xᵀ kept, or recomputed
    from u in backward, written expanded)."""
    from microscale.kernels import gemm_alpha
    from microscale.nn import mlp
    monkeypatch.setitem(mlp.CONFIG, "DU_IN_DGRAD", True)
    fused, real = [], gemm_alpha.alpha_mm
    monkeypatch.setattr(gemm_alpha, "alpha_mm", lambda *a, **k: fused.append(
        (k["epilogue"][0] if k.get("epilogue") else "",
         k["out_amax"].op if k.get("out_amax") is not None else None)) or real(*a, **k))
    torch.manual_seed(0)
    up = ms.Linear(512, 2048, bias=False, recipe=recipe, device="cuda")
    down = ms.Linear(2048, 512, bias=False, recipe=recipe, device="cuda")
    down.recompute_input = recompute
    _same_bits(up, down, tokens=(4, 1000))
    # the fused run's down dgrad, du's amaxes in its epilogue too (DU_AMAX_IN_DGRAD), and its
    # up fprop with relu(u)²'s (U_AMAX_IN_FPROP; both on by default)
    du_amax = "" if mlp.CONFIG["DU_AMAX_IN_DGRAD"] else None
    assert fused.count(("relu_square_grad", du_amax)) == 1, fused
    assert fused.count(("", "relu_square")) == int(mlp.CONFIG["U_AMAX_IN_FPROP"]), fused
