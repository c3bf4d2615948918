"""linear_from: a layer on op(*sources) that keeps the sources, not its quantized input's view.

Same bits as ``layer(op(*sources))`` (outputs, the sources' gradients, dW, db) for every preset,
on token counts that need padding; less kept for backward; the fallbacks (delayed scaling, no
grad, high precision, plain nn.Linear) give the ordinary layer; bad arguments raise."""

import copy
import dataclasses
import json
from unittest import mock

import pytest
import torch
from torch import nn

import microscale as ms
from microscale.nn.mlp import Relu2MLPFn
from microscale.nn.recompute import OPS, RecomputedInputLinearFn, linear_from
from test_expand import _same          # bit-equal, any two NaNs equal (expanded views)

RECIPES = ["fp8_blockwise", "fp8_tensorwise", "mxfp8", "mxfp4", "nvfp4", "nvfp4_no_sr", "fp8_delayed"]


def _run(layer, op, sources, grad, fused: bool, seed: int = 7):
    layer = copy.deepcopy(layer)                   # delayed scaling: both start from one state
    srcs = [s.detach().clone().requires_grad_() for s in sources]
    torch.manual_seed(seed)                                    # the layer's SR seeds
    y = linear_from(layer, op, *srcs) if fused else layer(OPS[op][0](*srcs))
    y.backward(grad)
    out = [y.detach()] + [s.grad for s in srcs] + [layer.weight.grad.clone()]
    out += [layer.bias.grad.clone()] if layer.bias is not None else []
    return out


def _same_bits(recipe, op, device, tokens=(3, 50)):
    torch.manual_seed(0)
    layer = ms.Linear(256, 128, bias=op == "mul", recipe=recipe, device=device)
    layer.recompute_input = True
    n = 1 if op == "square" else 2
    sources = [torch.randn(*tokens, 256, dtype=torch.bfloat16, device=device) for _ in range(n)]
    grad = torch.randn(*tokens, 128, dtype=torch.bfloat16, device=device)    # 150 tokens: padded
    fused, plain = _run(layer, op, sources, grad, True), _run(layer, op, sources, grad, False)
    for a, b in zip(fused, plain, strict=True):
        assert a.dtype == b.dtype and torch.equal(a, b)


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("op", ["square", "mul"])
def test_same_bits_as_the_layer_on_the_op(recipe, op):
    _same_bits(recipe, op, "cpu")


@pytest.mark.parametrize("recipe", ["fp8_blockwise", "fp8_tensorwise", "nvfp4"])
@pytest.mark.parametrize("op", ["square", "mul"])
def test_same_bits_with_the_fused_kernels_interpreted(recipe, op):
    """The kernels that apply the op as they load (FP8 1x128 / NVFP4 row view alone in
    forward, column view alone in backward, NVFP4's written expanded by the reg pass;
    tensorwise cast with forward's amax), in Triton's interpreter: still the layer's bits on
    op(*sources)."""
    pytest.importorskip("triton")
    from microscale.recipe import Recipe
    rec = dataclasses.replace(Recipe.parse(recipe), backend="triton")
    _same_bits(rec, op, "cpu", tokens=(2, 128))
    keys = {"fp8_blockwise": ["none|fp8_block", "fp8_block|none"],
            "fp8_tensorwise": ["none|fp8_tensor"],  # (x's row view: fused only with the amax given)
            "nvfp4": ["none|nvfp4"]}[recipe]  # ("nvfp4|none": the 2D weight's, called last)
    for key in keys:
        assert f"{op} fused into its loads" in ms.explain()[("quantize_rowcol", key)], key
    if recipe == "nvfp4":                  # xᵀ written expanded by the kernel: no decode pass
        assert "reg pass" in ms.explain()[("quantize_rowcol", "none|nvfp4")]


@pytest.mark.gpu
@pytest.mark.parametrize("recipe", ["fp8_blockwise", "fp8_tensorwise", "mxfp8", "nvfp4"])
def test_same_bits_on_cuda_with_the_kernels(recipe):
    _same_bits(recipe, "square", "cuda")
    _same_bits(recipe, "mul", "cuda")


def _saved_bytes(fn) -> int:
    """Bytes of the distinct storages autograd keeps while ``fn()``'s output lives."""
    storages = {}

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    del out
    return sum(storages.values())


@pytest.mark.parametrize("recipe", ["fp8_blockwise", "nvfp4"])
def test_keeps_the_sources_not_the_view(recipe):
    torch.manual_seed(0)
    layer = ms.Linear(512, 2048, bias=False, recipe=recipe)
    r = torch.randn(256, 512, dtype=torch.bfloat16, requires_grad=True)
    # what the activation's backward keeps (r, for relu² after the relu) is common to both
    plain = _saved_bytes(lambda: layer(r.square()))
    view = {"fp8_blockwise": 256 * 512 + 4 * 2 * 512, "nvfp4": 256 * 512 // 2 + 256 * 512 // 16}[recipe]
    # the default (None) is on where xᵀ's wgrad view is FP8 or MXFP8 and the layer 2048+
    # wide, and where it is NVFP4 at any width
    assert layer.recompute_input is None
    default = _saved_bytes(lambda: linear_from(layer, "square", r))
    assert plain - default >= view
    narrow = ms.Linear(512, 128, bias=False, recipe=recipe)
    narrow_plain = _saved_bytes(lambda: narrow(r.square()))
    narrow_default = _saved_bytes(lambda: linear_from(narrow, "square", r))
    if recipe == "nvfp4":
        assert narrow_plain - narrow_default >= view
    else:
        assert narrow_default == narrow_plain                        # off below 2048
    ms.set_recompute_input(layer, False)
    assert _saved_bytes(lambda: linear_from(layer, "square", r)) == plain
    assert ms.set_recompute_input(layer) == 1 and layer.recompute_input
    fused = _saved_bytes(lambda: linear_from(layer, "square", r))
    assert plain - fused >= view                 # the quantized xᵀ (codes + scales) is gone


def test_fallbacks_give_the_plain_layer():
    torch.manual_seed(0)
    layer = ms.Linear(128, 128, bias=False, recipe="fp8_blockwise")
    layer.recompute_input = True
    a = torch.randn(130, 128, dtype=torch.bfloat16)
    with torch.no_grad():
        assert torch.equal(linear_from(layer, "square", a), layer(a.square()))
    layer.high_precision = True
    assert torch.equal(linear_from(layer, "square", a), layer(a.square()))
    plain = nn.Linear(128, 128)
    assert torch.equal(linear_from(plain, "square", a.float()), plain(a.float().square()))


def test_bad_arguments_raise():
    layer = ms.Linear(128, 128, recipe="fp8_blockwise")
    a = torch.randn(8, 128, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="op must be one of"):
        linear_from(layer, "relu", a)
    with pytest.raises(ValueError, match="recompute must be"):
        layer(a.square(), recompute=("square", (a[:4],)))


@pytest.mark.parametrize("mlp", ["relu2", "swiglu"])
def test_zoo_model_trains_the_same_with_and_without_recompute(mlp):
    from microscale.train.model import build_model
    losses = {}
    for recompute in (True, False):
        torch.manual_seed(0)
        model = build_model("micro", mlp=mlp)
        ms.convert(model, "fp8_blockwise")
        ms.set_recompute_input(model, recompute)
        ids = torch.randint(0, 256, (2, 128))
        calls = []
        # relu²: the MLP's fused node (nn.mlp), whose last argument says whether it keeps
        # relu(u)²'s view; SwiGLU: the down projection's own node where recompute is on
        fn = Relu2MLPFn if mlp == "relu2" else RecomputedInputLinearFn
        apply = fn.apply
        with mock.patch.object(fn, "apply",
                               side_effect=lambda *a, c=calls, f=apply: c.append(a[-1]) or f(*a)), \
                torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.roll(-1, 1).flatten())
        loss.backward()
        if mlp == "relu2":                                        # both blocks' MLP
            assert calls == [not recompute] * 2
        else:
            assert len(calls) == (2 if recompute else 0)          # both blocks' down_proj
        losses[recompute] = [loss.detach()] + [p.grad for p in model.parameters() if p.grad is not None]
    assert all(torch.equal(a, b) for a, b in zip(losses[True], losses[False], strict=True))


def test_trainer_flag_trains_the_same(tmp_path):
    """``microscale train --recompute-input``: the same losses, bit for bit (CPU, micro)."""
    from microscale.train.data import stdlib_corpus
    from microscale.train.trainer import TrainConfig, Trainer
    data = stdlib_corpus(tmp_path / "corpus", max_bytes=100_000)
    losses = {}
    for flag in (False, True):
        cfg = TrainConfig(recipe="fp8_blockwise", model="micro", steps=3, batch_size=2, seq_len=128,
                          compile="off", eval_every=100, ckpt_every=0, out=str(tmp_path / str(flag)),
                          device="cpu", max_bytes=100_000, progress=False, recompute_input=flag)
        trainer = Trainer(cfg, data=data)
        trainer.fit()
        assert all(m.recompute_input == flag for m in trainer.model.modules() if isinstance(m, ms.Linear))
        losses[flag] = (tmp_path / str(flag) / "metrics.jsonl").read_text().splitlines()
    strip = [[{k: v for k, v in json.loads(line).items() if k in ("step", "loss")}
              for line in losses[f]] for f in (False, True)]
    assert strip[0] == strip[1] and len(strip[0]) == 3


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("fmt", ["fp8_block", "fp8_tensor"])
@pytest.mark.parametrize("op", ["square", "mul"])
def test_prologue_kernels_match_the_reference_on_edge_values(fmt, op, device):
    """``quantize_views(..., prologue=op)`` with the kernels (the interpreter on CPU) = the
    reference's views of ``op(x, x2)``: NaN, ±Inf, products that overflow to Inf or underflow
    to 0, signs."""
    pytest.importorskip("triton")
    from microscale.distributed.reduce import local_amax
    from microscale.ops import apply_prologue, quantize_views
    from microscale.tensor import QFormat
    g = torch.Generator().manual_seed(3)
    x, x2 = (torch.randn(256, 384, generator=g).mul(4).to(torch.bfloat16) for _ in range(2))
    flat = x.view(-1)
    flat[[5, 77, 1000]] = torch.tensor([float("nan"), float("inf"), -float("inf")],
                                       dtype=torch.bfloat16)
    flat[[9, 4000, 5000]] = torch.tensor([3e20, -2e19, 1e-25], dtype=torch.bfloat16)
    x2.view(-1)[[13, 6000]] = torch.tensor([float("nan"), 1e30], dtype=torch.bfloat16)
    second = x2 if op == "mul" else None
    x_op = apply_prologue(op, x, second)
    opts = {"check_finite": False}
    if fmt == "fp8_tensor":
        opts["amax"] = local_amax(x_op)            # as the layer passes forward's amax
    col = (QFormat(fmt), {k: v.to(device) if torch.is_tensor(v) else v for k, v in opts.items()})
    _, q_k = quantize_views(x.to(device), None, col, "triton", op,
                            None if second is None else second.to(device))
    assert f"{op} fused into its loads" in ms.explain()[("quantize_rowcol", f"none|{fmt}")]
    _, q_r = quantize_views(x_op, None, (QFormat(fmt), opts), "reference")
    for name in ("data", "scale", "amax"):
        a, b = getattr(q_k, name).cpu(), getattr(q_r, name)
        assert torch.equal(a.view(torch.uint8) if a.dtype.is_floating_point and a.element_size()
                           == 1 else a, b.view(torch.uint8) if b.dtype.is_floating_point and
                           b.element_size() == 1 else b), name


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("views", ["fp8_block|fp8_block", "none|fp8_block", "none|fp8_tensor",
                                   "mxfp8_e4m3|mxfp8_e5m2", "none|mxfp8_e4m3"])
@pytest.mark.parametrize("op", ["relu_square", "relu_square_grad"])
def test_relu_prologues_match_the_reference_on_edge_values(op, views, dtype, device):
    """``relu_square`` / ``relu_square_grad`` (``nn.mlp``) in the FP8 kernels (a 1x128 pair and
    column view, the tensorwise cast, the MXFP8 pair and column view) = the reference's views
    of the op applied first: NaN and ±0 in u (relu keeps NaN; the gradient is +0 where u <= 0),
    2u overflowing (fp16 before fp32), 0 · Inf, products that underflow."""
    pytest.importorskip("triton")
    from microscale.distributed.reduce import local_amax
    from microscale.ops import apply_prologue, quantize_views
    from microscale.tensor import QFormat
    g = torch.Generator().manual_seed(5)
    x, u = (torch.randn(256, 384, generator=g).mul(4).to(dtype) for _ in range(2))
    big = 40000.0 if dtype == torch.float16 else 2e38                # 2·big overflows
    u.view(-1)[[3, 13, 20, 21, 22, 24, 600]] = torch.tensor(
        [float("nan"), -0.0, big, big, -big, big, 1e-4], dtype=dtype)
    x.view(-1)[[13, 20, 21, 24, 600, 700]] = torch.tensor(
        [float("nan"), 0.0, 1.5, 1e-3, 1e-4, float("inf")], dtype=dtype)
    second = u if op == "relu_square_grad" else None
    first = x if second is not None else u
    x_op = apply_prologue(op, first, second)
    row_key, col_key = views.split("|")
    opts = {"check_finite": False}
    if col_key == "fp8_tensor":
        opts["amax"] = local_amax(x_op)
    on_dev = {k: v.to(device) if torch.is_tensor(v) else v for k, v in opts.items()}
    row = (QFormat(row_key), on_dev) if row_key != "none" else None
    q_k = quantize_views(first.to(device), row, (QFormat(col_key), on_dev), "triton", op,
                         None if second is None else second.to(device))
    assert f"{op} fused into its loads" in ms.explain()[("quantize_rowcol", views)]
    q_r = quantize_views(x_op, (QFormat(row_key), opts) if row else None,
                         (QFormat(col_key), opts), "reference")
    for qk, qr in zip(q_k, q_r, strict=True):
        if qr is None:
            assert qk is None
            continue
        for name in ("data", "scale", "amax"):
            a, b = getattr(qk, name).cpu(), getattr(qr, name)
            if a.dtype.is_floating_point and a.element_size() == 1:
                a, b = a.view(torch.uint8), b.view(torch.uint8)
            assert torch.equal(a, b), name


def test_in_graph_amax_is_taken_of_the_op_not_its_source(monkeypatch):
    """Where xᵀ is tensorwise FP8 but forward's x view is not (here fprop in high precision),
    the amax comes from the graph, as under torch.compile: it must be op(*sources)'s, not the
    first source's (same bits as the layer on op(*sources) with the same graph amax)."""
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    torch.manual_seed(0)
    layer = ms.Linear(256, 128, recipe="fp8_tensorwise")
    layer.recompute_input, layer.hp_fprop = True, True
    sources = [torch.randn(2, 128, 256, dtype=torch.bfloat16)]
    grad = torch.randn(2, 128, 128, dtype=torch.bfloat16)
    fused, plain = _run(layer, "square", sources, grad, True), \
        _run(layer, "square", sources, grad, False)
    for a, b in zip(fused, plain, strict=True):
        assert torch.equal(a, b)


@pytest.mark.gpu
@pytest.mark.parametrize("recipe", ["fp8_blockwise", "fp8_tensorwise", "nvfp4"])
def test_compiled_zoo_model_same_with_and_without_recompute_on_cuda(recipe):
    """Under torch.compile on the GPU (the op fused into the kernels' loads, forward's x left
    unwritten, a tensorwise amax from the graph, NVFP4's xᵀ amax measured in forward): loss
    and every gradient as with the view kept, bit for bit."""
    from microscale.train.model import build_model
    out = {}
    for recompute in (True, False):
        torch.manual_seed(0)
        model = build_model("micro").cuda()
        ms.convert(model, recipe)
        ms.set_recompute_input(model, recompute)
        torch._dynamo.reset()
        compiled = torch.compile(model, fullgraph=True)
        ids = torch.randint(0, 256, (2, 128), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(compiled(ids).flatten(0, 1),
                                               ids.roll(-1, 1).flatten())
        loss.backward()
        out[recompute] = {"loss": loss.detach()} | {n: p.grad for n, p in
                                                    model.named_parameters() if p.grad is not None}
    # Close, not equal: the parameters whose gradient Inductor computes around the quantized
    # layers. Recompute changes what the compiled graph saves, so the RMSNorm backward (the
    # weight's sum over tokens, and dx, which reaches the embedding) is fused and ordered
    # differently: fp32 rounding differences (H200, session 46: blocks.0.attn_norm.weight; on
    # CPU the embedding's gradient moves ~1e-7 relative), and the embedding's scatter-add uses
    # atomics on the GPU. Every quantized layer's weight gradient and the loss: bit for bit.
    assert out[True].keys() == out[False].keys()
    around = [k for k in out[True] if "norm" in k or k == "tok_emb.weight"]
    for k in around:
        a, b = out[True].pop(k), out[False].pop(k)
        tol = 1e-5 * float(b.abs().max())
        assert torch.allclose(a, b, rtol=0, atol=tol), (k, float((a - b).abs().max()), tol)
    assert len(out[True]) > 4      # the loss and the quantized blocks' weights at least
    assert all(torch.equal(out[True][k], out[False][k]) for k in out[True]), \
        [k for k in out[True] if not torch.equal(out[True][k], out[False][k])]


def test_cli_switch_values():
    """``microscale train --recompute-input [auto|on|off]``: auto (the default) leaves each
    layer's own default (None: on for FP8 wgrad views); a bare flag means on."""
    from microscale.train.cli import build_parser, config_from_args
    p = build_parser()
    want = {(): None, ("--recompute-input",): True, ("--recompute-input", "on"): True,
            ("--recompute-input", "off"): False, ("--recompute-input", "auto"): None}
    for extra, value in want.items():
        args = p.parse_args(["train", "--recipe", "fp8_blockwise", *extra])
        assert config_from_args(args, "fp8_blockwise", "out").recompute_input is value, extra
    with pytest.raises(SystemExit):
        p.parse_args(["train", "--recompute-input", "sometimes"])


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("op,dtype", [("relu_square", torch.bfloat16),
                                      ("relu_square_grad", torch.bfloat16),
                                      ("relu_square_grad", torch.float16),
                                      ("mul", torch.bfloat16)])
@pytest.mark.parametrize("rows,cols", [(256, 64), (48, 80)], ids=["whole-tile", "masked"])
def test_nvfp4_prologues_match_the_reference_on_edge_values(op, dtype, rows, cols, device):
    """The prologues in NVFP4's reg pass and its amax pass (``nn.mlp`` fuses the relu² ones):
    the x pair (RNE rows, RHT columns: one launch), the dy pair (SR rows, RHT+SR columns: two
    launches, caller bytes so that the reference draws the same), a column view alone (as
    codes, and expanded as ``nn.recompute`` asks for xᵀ), on a whole [256, 64] tile and a
    masked one = the reference's views of the op applied first;
    with in-kernel Philox, the same bits as the kernels given the op's result. Edge values as
    above."""
    pytest.importorskip("triton")
    from microscale.ops import apply_prologue, quantize_views
    from microscale.tensor import QFormat
    g = torch.Generator().manual_seed(6)
    x, u = (torch.randn(rows, cols, generator=g).mul(4).to(dtype) for _ in range(2))
    big = 40000.0 if dtype == torch.float16 else 2e38
    u.view(-1)[[3, 13, 20, 21, 22, 24, 600]] = torch.tensor(
        [float("nan"), -0.0, big, big, -big, big, 1e-4], dtype=dtype)
    x.view(-1)[[13, 20, 21, 24, 600, 700]] = torch.tensor(
        [float("nan"), 0.0, 1.5, 1e-3, 1e-4, float("inf")], dtype=dtype)
    second = u if op in ("relu_square_grad", "mul") else None
    first = x if second is not None else u
    x_op = apply_prologue(op, first, second)
    nf = {"check_finite": False}
    bits = {"rand_bits": torch.randint(0, 256, (rows, cols), dtype=torch.uint8, generator=g)}
    bits_t = {"rand_bits": torch.randint(0, 256, (cols, rows), dtype=torch.uint8, generator=g)}
    seed = {"seed": torch.tensor([11], dtype=torch.int32)}
    pairs = [(nf, {**nf, "rht": True}, "reference"),
             ({**nf, "stochastic": True, **bits}, {**nf, "rht": True, "stochastic": True, **bits_t},
              "reference"),
             (None, {**nf, "rht": True}, "reference"),
             (None, {**nf, "rht": True, "expand": True}, "reference"),   # nn.recompute's xᵀ
             ({**nf, "stochastic": True, **seed}, {**nf, "rht": True, "stochastic": True, **seed},
              "triton")]

    def on(opts, dev):
        return None if opts is None else \
            (QFormat.NVFP4, {k: v.to(dev) if torch.is_tensor(v) else v for k, v in opts.items()})

    for row, col, twin in pairs:
        q_k = quantize_views(first.to(device), on(row, device), on(col, device), "triton", op,
                             None if second is None else second.to(device))
        key = f"{'none' if row is None else 'nvfp4'}|nvfp4"
        assert f"{op} fused into its loads" in ms.explain()[("quantize_rowcol", key)]
        if col.get("expand"):           # written so by the reg pass itself, not decoded after
            assert "reg pass" in ms.explain()[("quantize_rowcol", key)]
            assert q_k[1].expanded and q_k[1].data.dtype == torch.bfloat16
        dev = "cpu" if twin == "reference" else device
        q_r = quantize_views(x_op.to(dev), on(row, dev), on(col, dev), twin)
        for qk, qr in zip(q_k, q_r, strict=True):
            if qr is None:
                assert qk is None
                continue
            for name in ("data", "scale", "amax"):
                a, b = getattr(qk, name).cpu(), getattr(qr, name).cpu()
                if a.dtype == torch.bfloat16:      # expanded: bits, any two NaNs equal
                    assert _same(a, b), (name, row, col)
                    continue
                if a.dtype.is_floating_point and a.element_size() == 1:
                    a, b = a.view(torch.uint8), b.view(torch.uint8)
                assert torch.equal(a, b), (name, row, col)


@pytest.mark.parametrize("backend,device", [("reference", "cpu"), ("triton", "cpu"),
                                            pytest.param("triton", "cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("rht,given_row_amax", [(True, False), (True, True), (False, False)],
                         ids=["rht", "rht-row-amax-given", "plain"])
def test_nvfp4_column_amax_alone(backend, device, rht, given_row_amax):
    """``quantize_rowcol`` with an ``amax_only`` NVFP4 column view (what ``nn.recompute`` asks
    for in forward): the row view's bits as quantized alone, and in the column view's place
    the amax the full column view measures (``quant.nvfp4.nvfp4_amax``'s), bit for bit, of
    relu(u)² fused into the loads, with a NaN and ±1e18 in u; on the kernels' amax pass with
    per-program maxima and, with the row view's amax given, with its atomics; the op's fake
    passes opcheck; a view the kernels cannot measure this way is refused."""
    if backend == "triton":
        pytest.importorskip("triton")
    from microscale.ops import apply_prologue, quantize_views, view_spec
    from microscale.tensor import QFormat
    g = torch.Generator().manual_seed(4)
    u = torch.randn(96, 80, generator=g).mul(3).to(torch.bfloat16)
    u.view(-1)[[5, 17, 18]] = torch.tensor([float("nan"), 1e18, -1e18], dtype=torch.bfloat16)
    u = u.to(device)
    nf = {"check_finite": False}
    col = {**nf, "rht": True} if rht else dict(nf)
    x_op = apply_prologue("relu_square", u, None)
    row_amax = {"amax": x_op.float().nan_to_num(0.0).abs().amax()} if given_row_amax else {}
    row = (QFormat.NVFP4, {**nf, "expand": True, **row_amax})
    q_row, amax = quantize_views(u, row, (QFormat.NVFP4, {**col, "amax_only": True}), backend,
                                 "relu_square", None)
    if backend == "triton":            # measured by the kernel's amax pass, not afterwards
        path = ms.explain()[("quantize_rowcol", "nvfp4|none")]
        assert "amax alone measured beside it" in path and "reference" not in path, path
    row_cpu = (QFormat.NVFP4, {k: v.cpu() if torch.is_tensor(v) else v for k, v in row[1].items()})
    alone, _ = quantize_views(x_op.cpu(), row_cpu, None, "reference")
    full = quantize_views(x_op.cpu(), None, (QFormat.NVFP4, col), "reference")[1]
    assert torch.is_tensor(amax) and amax.dim() == 0 and amax.dtype == torch.float32
    assert torch.equal(amax.cpu(), full.amax) and 0 < amax.item() < float("inf"), (amax, full)
    for name in ("data", "scale", "amax"):
        a, b = getattr(q_row, name).cpu(), getattr(alone, name)
        assert _same(a.view(torch.uint8), b.view(torch.uint8)) if a.element_size() == 1 \
            else _same(a, b), name
    specs = [view_spec(*row), view_spec(QFormat.NVFP4, {**col, "amax_only": True})]
    torch.library.opcheck(torch.ops.microscale.quantize_rowcol.default,
                          (u, *specs, backend, None, None, None, row_amax.get("amax"), None,
                           None, None, "relu_square", None), test_utils=("test_faketensor",))
    for bad in ((QFormat.MXFP8_E4M3, {**nf, "amax_only": True}),
                (QFormat.NVFP4, {**col, "amax_only": True, "expand": True})):
        with pytest.raises(ValueError, match="amax_only"):
            quantize_views(u, row, bad, backend)


def test_nvfp4_recompute_takes_forwards_column_amax():
    """An NVFP4 layer with ``recompute_input`` on measures xᵀ's amax in forward, beside fprop's
    view (one ``amax_only`` column view, no pass of its own), and backward's recomputed xᵀ
    takes that tensor instead of measuring it again; the same bits as the plain layer
    (``test_same_bits_as_the_layer_on_the_op`` runs the presets)."""
    import microscale.nn.function as fn_mod
    calls = []
    real = fn_mod.quantize_views

    def spy(t, row, col, *rest):
        out = real(t, row, col, *rest)
        calls.append((row, col, out))
        return out
    torch.manual_seed(0)
    layer = ms.Linear(256, 128, recipe="nvfp4")
    layer.recompute_input = True
    sources = [torch.randn(2, 41, 256, dtype=torch.bfloat16)]          # 82 tokens: padded
    grad = torch.randn(2, 41, 128, dtype=torch.bfloat16)
    with mock.patch.object(fn_mod, "quantize_views", side_effect=spy):
        fused = _run(layer, "square", sources, grad, True)
    measured = [c for c in calls if c[1] is not None and c[1][1].get("amax_only")]
    given = [c for c in calls if c[0] is None and c[1] is not None]    # backward's xᵀ alone
    assert len(measured) == 1 and measured[0][1][1].get("rht") and len(given) == 1
    assert given[0][1][1]["amax"] is measured[0][2][1]
    assert torch.equal(given[0][2][1].amax, measured[0][2][1])
    plain = _run(layer, "square", sources, grad, False)
    assert all(torch.equal(a, b) for a, b in zip(fused, plain, strict=True))
