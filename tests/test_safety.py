"""Layers, conversion and checkpoints never do something silently other than what was asked.

* ``ms.Linear`` with a zero feature size behaves like ``nn.Linear`` (the bias broadcast, or an
  empty output), and a plain ``nn.Linear`` state dict loads strictly into a converted model;
* a ``keep_high_precision`` rule of ``ms.convert`` that matches nothing raises, naming it;
* a damaged checkpoint raises a ValueError naming the entry *before* it touches the model,
  the optimizer or any RNG: every piece of process state is compared before and after.
"""

from __future__ import annotations

import json
import logging
import random
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn

import microscale as ms
from microscale.train import checkpoint as ckpt_mod
from microscale.train.model import build_model


# ----------------------------------------------------------------------------- Linear
@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors")
@pytest.mark.parametrize("bias", [True, False])
def test_zero_in_features_returns_the_bias_like_nn_linear(bias):
    layer, ref = ms.Linear(0, 16, bias=bias), nn.Linear(0, 16, bias=bias)
    if bias:
        ref.bias.data.copy_(layer.bias.data)
    x = torch.randn(3, 4, 0, requires_grad=True)
    y = layer(x)
    torch.testing.assert_close(y, ref(x))
    y.sum().backward()
    assert x.grad.shape == x.shape and layer.weight.grad.shape == (16, 0)
    assert ms.Linear(16, 0)(torch.randn(2, 16)).shape == (2, 0)
    assert layer.precision == "high_precision"


def test_plain_nn_state_dict_loads_strictly_into_a_converted_model():
    plain = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 64)).to(torch.bfloat16)
    model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 64))
    ms.convert(model, "mxfp8", keep_high_precision=[])
    recipe = model[0].recipe
    model.load_state_dict(plain.state_dict(), strict=True)       # no _extra_state: weights only
    assert model[0].recipe == recipe and model[0].weight.dtype == torch.float32
    torch.testing.assert_close(model[2].weight, plain[2].weight.float(), rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="Unexpected key"):     # other keys are still checked
        model.load_state_dict({**plain.state_dict(), "9.weight": torch.ones(1)}, strict=True)


def test_damaged_extra_state_is_a_named_error():
    layer = ms.Linear(32, 32, recipe="fp8_delayed")
    state = layer.get_extra_state()
    for bad in (state[:20], torch.cat([state, torch.zeros(3, dtype=torch.uint8)]),
                torch.zeros(4, dtype=torch.uint8)):
        with pytest.raises(ValueError, match="_extra_state"):
            layer.set_extra_state(bad)


# ----------------------------------------------------------------------------- convert
def _mlp(n: int = 4) -> nn.Module:
    return nn.Sequential(*[nn.Sequential(nn.Linear(32, 32), nn.ReLU()) for _ in range(n)])


@pytest.mark.parametrize("keep", ["frist:2", "blocks.*.fc1", ["first:1", "*.nothing"]])
def test_unmatched_keep_rule_raises_naming_it_and_leaves_the_model(keep):
    model = _mlp()
    with pytest.raises(ValueError, match="matched no linear layer") as err:
        ms.convert(model, "nvfp4", keep_high_precision=keep)
    assert ("frist" in str(err.value)) == ("frist:2" in keep)
    assert all(type(m) is nn.Linear for m in model.modules() if isinstance(m, nn.Linear))


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.text = ""

    def emit(self, record):
        self.text += record.getMessage()


def test_unmatched_keep_rule_can_warn_and_empty_rules_are_fine():
    records, logger = _Records(), logging.getLogger("microscale.nn.convert")
    logger.addHandler(records)                    # (the suite runs with -p no:logging)
    try:
        report = ms.convert(_mlp(), "nvfp4", keep_high_precision="frist:2", on_unmatched="warn")
    finally:
        logger.removeHandler(records)
    assert len(report.converted) == 4 and "frist:2" in records.text
    for keep in ([], "first:0", ["last_fraction:0", "first:1"], None):
        ms.convert(_mlp(), "nvfp4", keep_high_precision=keep)          # no error
    report = ms.convert(_mlp(), "nvfp4", keep_high_precision="0.0")   # a module path matches
    assert report.kept == {"0.0": "matches '0.0'"}
    with pytest.raises(ValueError, match="on_unmatched"):
        ms.convert(_mlp(), "nvfp4", on_unmatched="skip")


# ----------------------------------------------------------------------------- checkpoints
def _process_state(model, opt) -> dict:
    return {"model": {k: v.clone() if torch.is_tensor(v) else v
                      for k, v in model.state_dict().items()},
            "opt": json.dumps(opt.state_dict()["param_groups"]),
            "opt_state": {i: {k: v.clone() for k, v in s.items()}
                          for i, s in opt.state_dict()["state"].items()},
            "torch": torch.get_rng_state().clone(), "numpy": np.random.get_state()[1].copy(),
            "python": random.getstate()}


def _assert_same_process_state(a: dict, b: dict) -> None:
    for k, v in a["model"].items():
        assert (torch.equal(v, b["model"][k]) if torch.is_tensor(v) else v == b["model"][k]), k
    assert a["opt"] == b["opt"] and a["python"] == b["python"]
    assert torch.equal(a["torch"], b["torch"]) and np.array_equal(a["numpy"], b["numpy"])
    for i, s in a["opt_state"].items():
        assert all(torch.equal(v, b["opt_state"][i][k]) for k, v in s.items())


@pytest.fixture(scope="module")
def checkpoint_files(tmp_path_factory):
    """One checkpoint of a trained step (written once; each test damages its own copy)."""
    torch.manual_seed(0)
    model = build_model("micro")
    ms.convert(model, "fp8_delayed")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randint(0, 256, (2, 16))).sum().backward()
    opt.step()
    return ckpt_mod.save_checkpoint(tmp_path_factory.mktemp("ckpt"), 1, model, opt, {})


@pytest.fixture
def saved(checkpoint_files, tmp_path):
    """``(path of a fresh copy, a different model, its optimizer with state)``."""
    for src in (checkpoint_files, checkpoint_files.with_suffix(".safetensors")):
        shutil.copy(src, tmp_path / src.name)
    torch.manual_seed(1)
    fresh = build_model("micro")
    ms.convert(fresh, "fp8_delayed")
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=1e-3)
    for p in fresh.parameters():
        p.grad = torch.ones_like(p)
    fresh_opt.step()
    return tmp_path / checkpoint_files.name, fresh, fresh_opt


def _damage_json(path, fn):
    meta = json.loads(path.read_text())
    fn(meta)
    path.write_text(json.dumps(meta))


def _damage_tensors(path, fn):
    weights = path.with_suffix(".safetensors")
    tensors = load_file(weights)
    fn(tensors)
    save_file(tensors, weights)


DAMAGE = {
    "rng_torch": lambda p: _damage_json(p, lambda m: m["rng"].update(torch_cpu="AAAA")),
    "rng_numpy": lambda p: _damage_json(p, lambda m: m["rng"]["numpy"].__setitem__(1, [1, 2])),
    "rng_python": lambda p: _damage_json(p, lambda m: m["rng"].update(python=[3, [1], None])),
    "rng_missing": lambda p: _damage_json(p, lambda m: m.pop("rng")),
    "json": lambda p: p.write_text("{ truncated"),
    "optimizer_groups": lambda p: _damage_json(
        p, lambda m: m["optimizer"]["__dict__"][1][1].append(m["optimizer"]["__dict__"][1][1][0])),
    "tensor_shape": lambda p: _damage_tensors(
        p, lambda t: t.update({k: t[k][:1] for k in list(t) if k.endswith("up_proj.weight")})),
    "tensor_missing": lambda p: _damage_tensors(
        p, lambda t: [t.pop(k) for k in list(t) if k.endswith("down_proj.weight")]),
    "extra_state": lambda p: _damage_tensors(
        p, lambda t: t.update({k: t[k][:9] for k in list(t) if k.endswith("_extra_state")})),
    "tensors_file": lambda p: p.with_suffix(".safetensors").write_bytes(b"not safetensors"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_checkpoint_raises_before_touching_anything(saved, damage):
    path, model, opt = saved
    DAMAGE[damage](path)
    before = _process_state(model, opt)
    with pytest.raises(ValueError, match="checkpoint"):
        ckpt_mod.load_checkpoint(path, model, opt)
    _assert_same_process_state(before, _process_state(model, opt))


def test_undamaged_checkpoint_still_loads(saved):
    path, model, opt = saved
    assert ckpt_mod.load_checkpoint(path, model, opt)["step"] == 1
