"""linear_from: a layer on op(*sources) that keeps the sources, not its quantized input's view.

Same bits as ``layer(op(*sources))`` (outputs, the sources' gradients, dW, db) for every preset,
on token counts that need padding; less kept for backward; the fallbacks (delayed scaling, no
grad, high precision, plain nn.Linear) give the ordinary layer; bad arguments raise."""

import copy
import json
from unittest import mock

import pytest
import torch
from torch import nn

import microscale as ms
from microscale.nn.recompute import OPS, RecomputedInputLinearFn, linear_from

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


def _same_bits(recipe, op, device):
    torch.manual_seed(0)
    layer = ms.Linear(256, 128, bias=op == "mul", recipe=recipe, device=device)
    layer.recompute_input = True
    n = 1 if op == "square" else 2
    sources = [torch.randn(3, 50, 256, dtype=torch.bfloat16, device=device) for _ in range(n)]
    grad = torch.randn(3, 50, 128, dtype=torch.bfloat16, device=device)      # 150 tokens: padded
    fused, plain = _run(layer, op, sources, grad, True), _run(layer, op, sources, grad, False)
    for a, b in zip(fused, plain, strict=True):
        assert a.dtype == b.dtype and torch.equal(a, b)


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("op", ["square", "mul"])
def test_same_bits_as_the_layer_on_the_op(recipe, op):
    _same_bits(recipe, op, "cpu")


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
    layer = ms.Linear(512, 128, bias=False, recipe=recipe)
    r = torch.randn(256, 512, dtype=torch.bfloat16, requires_grad=True)
    # what the activation's backward keeps (r, for relu² after the relu) is common to both
    plain = _saved_bytes(lambda: layer(r.square()))
    assert _saved_bytes(lambda: linear_from(layer, "square", r)) == plain    # off by default
    assert ms.set_recompute_input(layer) == 1 and layer.recompute_input
    fused = _saved_bytes(lambda: linear_from(layer, "square", r))
    view = {"fp8_blockwise": 256 * 512 + 4 * 2 * 512, "nvfp4": 256 * 512 // 2 + 256 * 512 // 16}[recipe]
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
        apply = RecomputedInputLinearFn.apply
        with mock.patch.object(RecomputedInputLinearFn, "apply",
                               side_effect=lambda *a, c=calls, f=apply: c.append(1) or f(*a)), \
                torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.roll(-1, 1).flatten())
        loss.backward()
        assert len(calls) == (2 if recompute else 0)              # both blocks' down_proj
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
