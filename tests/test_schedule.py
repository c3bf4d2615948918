"""PrecisionSchedule and high_precision(): the switches flip at the right step and do what
they say (fprop-only vs all GEMMs in high precision), and evaluation restores state."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import microscale as ms
from microscale.recipe import Recipe


def _model():
    torch.manual_seed(0)
    return nn.Sequential(ms.Linear(32, 64, recipe="nvfp4_no_sr"), nn.ReLU(),
                         ms.Linear(64, 32, recipe="nvfp4_no_sr"), nn.Linear(32, 8))


def _bf16_linear(x, layer):
    bf = torch.bfloat16
    return (x.to(bf) @ layer.weight.to(bf).t()).to(x.dtype) + layer.bias


@pytest.mark.parametrize("mode, attr", [("fprop", "hp_fprop"), ("all", "high_precision")])
def test_switches_exactly_at_switch_step(mode, attr):
    model, sched = _model(), ms.PrecisionSchedule(10, mode)
    layers = [model[0], model[2]]
    for step in (0, 9):
        assert sched.apply(model, step) is False
        assert all(m.precision == "quantized" for m in layers)
    for step in (10, 11, 500):
        assert sched.apply(model, step) is True
        assert all(getattr(m, attr) for m in layers)
        assert all(m.precision == {"fprop": "hp_fprop", "all": "high_precision"}[mode]
                   for m in layers)
    sched.apply(model, 3)                                    # stateless: resuming earlier works
    assert all(m.precision == "quantized" for m in layers)
    assert ms.PrecisionSchedule(None).apply(model, 10**9) is False


def test_hp_fprop_runs_bf16_forward_and_quantized_backward():
    layer = ms.Linear(32, 32, recipe="nvfp4_no_sr")
    x, dy = torch.randn(16, 32), torch.randn(16, 32)
    grads = {}
    for hp_fprop in (False, True):
        layer.hp_fprop = hp_fprop
        layer.zero_grad()
        xg = x.clone().requires_grad_(True)
        y = layer(xg)
        y.backward(dy)
        grads[hp_fprop] = (y.detach(), xg.grad, layer.weight.grad.clone())
    torch.testing.assert_close(grads[True][0], _bf16_linear(x, layer), rtol=0, atol=0)
    assert not torch.equal(grads[True][0], grads[False][0])        # fprop did change
    assert torch.equal(grads[True][1], grads[False][1])            # dgrad still quantized
    assert torch.equal(grads[True][2], grads[False][2])            # wgrad still quantized


def test_high_precision_runs_every_gemm_in_bf16():
    layer = ms.Linear(32, 32, recipe="nvfp4")
    layer.high_precision = True
    x, dy = torch.randn(16, 32, requires_grad=True), torch.randn(16, 32)
    y = layer(x)
    y.backward(dy)
    bf = torch.bfloat16
    torch.testing.assert_close(y, _bf16_linear(x.detach(), layer), rtol=0, atol=0)
    torch.testing.assert_close(x.grad, (dy.to(bf) @ layer.weight.to(bf)).float(), rtol=0, atol=0)
    torch.testing.assert_close(layer.weight.grad, (dy.to(bf).t() @ x.detach().to(bf)).float(),
                               rtol=0, atol=0)


def test_high_precision_context_restores_state():
    model = _model()
    model[0].hp_fprop = True
    x = torch.randn(4, 32)
    y_q = model(x)
    with ms.high_precision(model) as m:
        assert m is model and model[0].high_precision and model[2].high_precision
        h = torch.relu(_bf16_linear(x, model[0]))
        torch.testing.assert_close(model[2](h), _bf16_linear(h, model[2]), rtol=0, atol=0)
    assert model[0].hp_fprop and not model[0].high_precision and not model[2].high_precision
    assert torch.equal(model(x), y_q)
    with pytest.raises(RuntimeError, match="boom"):
        with ms.high_precision(model):
            raise RuntimeError("boom")
    assert not model[2].high_precision and model[0].hp_fprop
    with ms.high_precision(model, enabled=False):
        assert not model[2].high_precision


def test_schedule_state_survives_state_dict():
    model = _model()
    ms.PrecisionSchedule(0, "all").apply(model, 5)
    fresh = _model()
    fresh.load_state_dict(model.state_dict())
    assert fresh[0].high_precision and fresh[2].high_precision


def test_from_end_and_validation():
    sched = ms.PrecisionSchedule.from_end(1000, 0.18)
    assert sched.switch_step == 820 and sched.mode == "fprop"
    assert not sched.active(819) and sched.active(820)
    with pytest.raises(ValueError, match="mode"):
        ms.PrecisionSchedule(10, "backward")
    with pytest.raises(ValueError, match="switch_step"):
        ms.PrecisionSchedule(-1)
    with pytest.raises(ValueError, match="fraction"):
        ms.PrecisionSchedule.from_end(100, 1.5)
    assert "switch_step=10" in repr(ms.PrecisionSchedule(10, "all"))
    assert Recipe.from_name("bf16") and ms.Linear(8, 8, recipe="bf16").precision == "high_precision"
