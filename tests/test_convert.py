"""ms.convert: which layers are swapped, which stay high precision and why, and the report."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import microscale as ms
from microscale.nn.convert import find_blocks


class Block(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.attn = nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

    def forward(self, x):
        x = x + self.attn(x)
        return x + self.fc2(torch.relu(self.fc1(x)))


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 80, d: int = 32, n_blocks: int = 8, head_name: str = "proj"):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(n_blocks))
        self.norm = nn.LayerNorm(d)
        setattr(self, head_name, nn.Linear(d, vocab, bias=False))
        self.head_name = head_name

    def forward(self, idx):
        x = self.tok(idx)
        for b in self.blocks:
            x = b(x)
        return getattr(self, self.head_name)(self.norm(x))


def _linears(prefix: str, blocks) -> set[str]:
    return {f"{prefix}.{i}.{n}" for i in blocks for n in ("attn", "fc1", "fc2")}


def test_default_keeps_last_15_percent_head_and_embedding():
    torch.manual_seed(0)
    model = TinyLM()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    report = ms.convert(model, "nvfp4")
    assert set(report.converted) == _linears("blocks", range(6))        # ceil(0.15*8) = 2 kept
    assert set(report.kept) == _linears("blocks", (6, 7)) | {"tok", "proj"}
    assert "vocabulary" in report.kept["proj"] and "embedding" in report.kept["tok"]
    assert "last_fraction:0.15" in report.kept["blocks.7.fc1"]
    assert (report.blocks, report.n_blocks) == ("blocks", 8)
    assert isinstance(model.blocks[0].fc1, ms.Linear) and model.blocks[0].fc1.name == "blocks.0.fc1"
    assert type(model.blocks[7].fc1) is nn.Linear and type(model.proj) is nn.Linear
    assert type(model.tok) is nn.Embedding
    after = model.state_dict()                                   # parameters copied unchanged
    for k, v in before.items():
        assert torch.equal(after[k], v), k
    out = model(torch.randint(0, 80, (2, 16)))
    out.sum().backward()
    assert model.blocks[0].fc1.weight.grad is not None
    text = str(report)
    assert "blocks.0.attn" in text and "converted" in text and "18 converted" in text
    assert json.loads(json.dumps(report.to_dict())) == report.to_dict()


@pytest.mark.parametrize("keep, kept_blocks", [
    ("first:2", (0, 1)),
    ("last:3", (5, 6, 7)),
    ("last_fraction:0.3", (5, 6, 7)),                      # ceil(2.4) = 3
    (["first:1", "last:1"], (0, 7)),
    ("last_fraction:0", ()),
])
def test_block_rules(keep, kept_blocks):
    model = TinyLM()
    report = ms.convert(model, "nvfp4", keep_high_precision=keep)
    assert set(report.kept) - {"tok", "proj"} == _linears("blocks", kept_blocks)
    assert set(report.converted) == _linears("blocks", set(range(8)) - set(kept_blocks))


def test_patterns_and_callable():
    report = ms.convert(TinyLM(), "mxfp8", keep_high_precision="blocks.*.attn")
    assert set(report.kept) - {"tok", "proj"} == {f"blocks.{i}.attn" for i in range(8)}
    assert report.kept["blocks.3.attn"] == "matches 'blocks.*.attn'"
    report = ms.convert(TinyLM(), "mxfp8",
                        keep_high_precision=lambda name, m: m.out_features == 64)
    assert set(report.kept) - {"tok", "proj"} == {f"blocks.{i}.fc1" for i in range(8)}
    # the FP8/MX presets keep no blocks by default
    assert len(ms.convert(TinyLM(), "mxfp8").converted) == 24


@pytest.mark.parametrize("head_name", ["lm_head", "output", "classifier"])
def test_head_detected_by_name_without_embedding(head_name):
    model = nn.Sequential()
    model.add_module("body", nn.Linear(32, 32))
    model.add_module(head_name, nn.Linear(32, 16))
    report = ms.convert(model, "nvfp4", keep_high_precision=[])
    assert report.converted == ["body"] and "named" in report.kept[head_name]


def test_vocab_sized_layer_inside_a_block_is_not_a_head():
    """The harness's 125m decoder: 256-token vocabulary, 256-wide v projections, and a head
    that is not an nn.Linear. No v projection may be kept as an 'output head'."""
    from microscale.train.model import build_model
    model = build_model("125m", max_seq_len=64)
    assert model.blocks[-1].attn.v_proj.out_features == model.config.vocab_size
    report = ms.convert(model, "fp8_blockwise")
    assert not [n for n, why in report.kept.items() if "output head" in why]
    assert f"blocks.{len(model.blocks) - 1}.attn.v_proj" in report.converted
    # a model whose last linear outside any block has the vocabulary's width: still the head
    lm = nn.Sequential(nn.Embedding(80, 32), nn.Linear(32, 32), nn.Linear(32, 80))
    assert "vocabulary" in ms.convert(lm, "mxfp8").kept["2"]


def test_tied_head_is_kept():
    model = TinyLM(vocab=64, head_name="decoder")
    model.decoder.weight = model.tok.weight
    assert "tied" in ms.convert(model, "nvfp4").kept["decoder"]


def test_untileable_layer_raises_or_skips():
    model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 40))
    with pytest.raises(ValueError, match=r"cannot convert '2'.*out_features=40.*multiple of 16"):
        ms.convert(model, "nvfp4", keep_high_precision=[])
    with pytest.warns(UserWarning, match="56% of the GEMM weights"):     # 40·32 of 72·32
        report = ms.convert(model, "nvfp4", keep_high_precision=[], on_error="skip")
    assert report.converted == ["0"] and "on_error='skip'" in report.kept["2"]
    assert type(model[2]) is nn.Linear


def test_blocks_sequential_root_and_mha():
    seq = nn.Sequential(*[Block(32) for _ in range(4)])
    assert find_blocks(seq) == ("", ["0", "1", "2", "3"])
    report = ms.convert(seq, "nvfp4")                            # ceil(0.6) = last block kept
    assert set(report.kept) == {"3.attn", "3.fc1", "3.fc2"}
    mixed = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32))
    assert find_blocks(mixed) == (None, [])
    assert len(ms.convert(mixed, "nvfp4").converted) == 2       # no blocks: nothing kept
    mha = nn.ModuleDict({"mha": nn.MultiheadAttention(32, 2), "fc": nn.Linear(32, 32)})
    with pytest.warns(UserWarning, match="in_proj_weight"):
        report = ms.convert(mha, "nvfp4")
    assert report.converted == ["fc"] and "MultiheadAttention" in report.kept["mha.out_proj"]
    assert "unsupported type MultiheadAttention" in report.kept["mha.in_proj_weight"]


def test_bad_arguments():
    with pytest.raises(TypeError, match="keep_high_precision"):
        ms.convert(TinyLM(), "nvfp4", keep_high_precision=3)
    with pytest.raises(ValueError, match="cannot parse 'first:two'"):
        ms.convert(TinyLM(), "nvfp4", keep_high_precision="first:two")
    with pytest.raises(ValueError, match="on_error"):
        ms.convert(TinyLM(), "nvfp4", on_error="ignore")
    with pytest.raises(ValueError, match="from_linear"):
        ms.convert(nn.Linear(32, 32), "nvfp4")
    with pytest.raises(TypeError, match="nn.Module"):
        ms.convert("model", "nvfp4")
