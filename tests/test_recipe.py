"""Recipe, GemmConfig, OperandConfig: presets as SPEC §9 says, validation, serialization."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

import microscale as ms
from microscale.recipe import PRESETS, GemmConfig, OperandConfig, Recipe, Rounding
from microscale.tensor import QFormat


def test_nvfp4_preset_is_spec_section_9():
    r = Recipe.from_name("nvfp4")
    assert (r.fprop.a.format, r.fprop.a.block) == (QFormat.NVFP4, (1, 16))
    assert r.fprop.a.rounding == Rounding.RNE
    assert r.fprop.b.block == (16, 16) and r.dgrad.b == r.fprop.b          # W reused in dgrad
    assert r.dgrad.a.rounding == Rounding.STOCHASTIC and r.dgrad.a.rht == 0
    assert (r.wgrad.a.rounding, r.wgrad.a.rht) == (Rounding.STOCHASTIC, 16)
    assert (r.wgrad.b.rounding, r.wgrad.b.rht, r.wgrad.b.block) == (Rounding.RNE, 16, (1, 16))
    assert r.hp_last_fraction == 0.15 and r.compute_dtype == torch.bfloat16
    assert r.fprop.b.square_tiles and not r.fprop.a.square_tiles


@pytest.mark.parametrize("name, sr, rht, w_block", [
    ("nvfp4_no_sr", False, 16, (16, 16)), ("nvfp4_no_rht", True, 0, (16, 16)),
    ("nvfp4_no_2d", True, 16, (1, 16)), ("nvfp4_base", False, 0, (1, 16)),
])
def test_nvfp4_ablations_change_one_knob(name, sr, rht, w_block):
    r = Recipe.from_name(name)
    assert (r.dgrad.a.rounding == Rounding.STOCHASTIC) == sr
    assert r.wgrad.a.rht == r.wgrad.b.rht == rht
    assert r.fprop.b.block == w_block


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_round_trips_json(name):
    r = Recipe.from_name(name)
    text = r.to_json()
    json.loads(text)
    assert Recipe.from_json(text) == r
    assert r.name == name and name in str(r)


@pytest.mark.parametrize("name, expected", [
    ("bf16", {"in": 1, "out": 1, "tokens": 1}),
    ("fp8_tensorwise", {"in": 1, "out": 1, "tokens": 1}),
    ("fp8_blockwise", {"in": 128, "out": 128, "tokens": 128}),
    ("mxfp8", {"in": 32, "out": 32, "tokens": 32}),
    ("mxfp4", {"in": 32, "out": 32, "tokens": 32}),
    ("nvfp4", {"in": 16, "out": 16, "tokens": 16}),
])
def test_required_multiples(name, expected):
    assert Recipe.from_name(name).required_multiples() == expected


def test_required_multiples_track_operand_rows_and_rht():
    # a 16x16-tiled dy in dgrad tiles the token rows, not `in`
    r = Recipe.from_name("nvfp4_base").with_operand("dgrad", "a", block=(16, 16))
    assert r.required_multiples() == {"in": 16, "out": 16, "tokens": 16}
    r = Recipe.from_name("nvfp4_base")
    r = r.with_gemm("wgrad", rht=64)
    assert r.wgrad.a.rht == r.wgrad.b.rht == 64
    assert r.required_multiples()["tokens"] == 64
    # an unquantized GEMM imposes nothing
    r = dataclasses.replace(Recipe.from_name("fp8_blockwise"), wgrad=GemmConfig())
    assert r.required_multiples()["tokens"] == 1


def test_with_operand_and_without_sr():
    r = Recipe.from_name("nvfp4")
    r2 = r.with_operand("dgrad", "a", rounding="rne")
    assert r2.dgrad.a.rounding == Rounding.RNE and r2.wgrad.a.rounding == Rounding.STOCHASTIC
    assert r.dgrad.a.rounding == Rounding.STOCHASTIC                        # frozen original
    off = r.without_sr()
    assert all(getattr(getattr(off, g), o).rounding == Rounding.RNE
               for g in ("fprop", "dgrad", "wgrad") for o in ("a", "b"))
    assert off.wgrad.a.rht == 16 and Recipe.from_name("fp8_delayed").without_sr() == \
        Recipe.from_name("fp8_delayed")


def test_quantize_kwargs_feed_ms_quantize():
    x = torch.randn(128, 128)
    for name in PRESETS:
        for g in Recipe.from_name(name).gemms.values():
            for op in (g.a, g.b):
                if op.quantized:
                    q = ms.quantize(x, op.format, **op.quantize_kwargs())
                    assert q.fmt == op.format and q.rht_d == op.rht


@pytest.mark.parametrize("kwargs, match", [
    ({"format": "nvfp4", "block": (1, 32)}, "block"),
    ({"format": "mxfp8_e4m3", "rounding": "stochastic"}, "stochastic rounding"),
    ({"format": "fp8_block", "rht": 16}, "rht is supported"),
    ({"format": "nvfp4", "rht": 12}, "power of two"),
    ({"format": "nvfp4", "delayed": True}, "delayed scaling"),
    ({"format": "fp8_tensor", "fp8_dtype": "e3m4"}, "fp8_dtype"),
    ({"format": "nvfp5"}, "unknown format"),
    ({"format": "mxfp4", "scale_rounding": "up"}, "scale_rounding"),
])
def test_operand_config_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        OperandConfig(**kwargs)


def test_recipe_validation():
    nv, nv_rht = OperandConfig("nvfp4"), OperandConfig("nvfp4", rht=16)
    with pytest.raises(ValueError, match="same RHT"):
        GemmConfig(nv, nv_rht)
    with pytest.raises(ValueError, match="same RHT"):
        Recipe.from_name("nvfp4").with_operand("wgrad", "a", rht=0)
    with pytest.raises(TypeError, match="GemmConfig"):
        Recipe("x", fprop=nv)
    with pytest.raises(TypeError, match="OperandConfig"):
        GemmConfig("nvfp4", nv)
    with pytest.raises(ValueError, match="compute_dtype"):
        Recipe("x", compute_dtype=torch.float64)
    with pytest.raises(ValueError, match="backend"):
        Recipe("x", backend="cuda")
    with pytest.raises(ValueError, match="hp_last_fraction"):
        Recipe("x", hp_last_fraction=1.0)
    with pytest.raises(ValueError, match="unknown recipe 'nvfp8'.*presets"):
        Recipe.from_name("nvfp8")
    with pytest.raises(ValueError, match="gemm must be"):
        Recipe.from_name("nvfp4").with_operand("bprop", "a")
    with pytest.raises(TypeError, match="recipe must be"):
        Recipe.parse(None)
    assert Recipe.parse("mxfp8") == Recipe.from_name("mxfp8")


def test_overrides_and_str():
    r = Recipe.from_name("nvfp4", compute_dtype=torch.float32, hp_last_fraction=0.0)
    assert r.compute_dtype == torch.float32 and Recipe.from_json(r.to_json()) == r
    text = str(r)
    assert "fprop  x: nvfp4 1x16 · w: nvfp4 16x16" in text
    assert "wgrad  dyᵀ: nvfp4 1x16 SR RHT16 · xᵀ: nvfp4 1x16 RHT16" in text
    assert "high precision" in str(Recipe.from_name("bf16"))
    assert str(Recipe.from_name("fp8_delayed").fprop.a) == "fp8_tensor e4m3 delayed"
