"""The harness model zoo: shapes that every recipe tiles, GQA/RoPE/causality, convert integration."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from microscale.recipe import PRESETS
from microscale.train.model import (MODEL_CONFIGS, LMHead, ModelConfig, RMSNorm, Transformer, _apply_rope,
                                    _rope_tables, build_model, flops_per_token)

_PARAM_RANGES = {"micro": (0.3e6, 0.6e6), "tiny": (0.8e6, 1.3e6), "small": (8e6, 12e6),
                 "50m": (40e6, 60e6), "125m": (110e6, 140e6), "350m": (320e6, 380e6),
                 "1b": (0.85e9, 1.1e9), "moe-tiny": (0.5e6, 0.8e6), "moe-1b": (0.9e9, 1.1e9)}


def _linears(cfg: ModelConfig) -> list[tuple[int, int]]:
    """(in, out) of every nn.Linear of a model with this config, without allocating it."""
    kv = cfg.kv_dim
    attn = [(cfg.d_model, cfg.d_model), (cfg.d_model, kv), (cfg.d_model, kv), (cfg.d_model, cfg.d_model)]
    if getattr(cfg, "n_experts", 0):     # MoE (train/moe.py): the shared expert's linears; the
        shared = cfg.d_expert * cfg.n_shared          # experts are 3-D, tiled by d_expert
        assert cfg.d_expert % 128 == 0
        return attn + ([(cfg.d_model, shared)] * 2 + [(shared, cfg.d_model)] if shared else [])
    mlp = [(cfg.d_model, cfg.hidden_dim)] * (2 if cfg.mlp == "swiglu" else 1) + [(cfg.hidden_dim, cfg.d_model)]
    return attn + mlp


@pytest.mark.parametrize("name", list(MODEL_CONFIGS))
@pytest.mark.parametrize("mlp", ["relu2", "swiglu"])
def test_sizes_tile_by_128_and_match_their_names(name, mlp):
    cfg = dataclasses.replace(MODEL_CONFIGS[name], mlp=mlp)
    for fan_in, fan_out in _linears(cfg):
        assert fan_in % 128 == 0 and fan_out % 128 == 0, (name, fan_in, fan_out)
    lo, hi = _PARAM_RANGES[name]
    assert lo <= cfg.num_params() <= hi, (name, cfg.num_params())


@pytest.mark.parametrize("name,mlp,tie", [("micro", "relu2", True), ("tiny", "swiglu", True),
                                          ("micro", "swiglu", False)])
def test_param_formula_matches_the_module(name, mlp, tie):
    model = build_model(name, mlp=mlp, tie_head=tie)
    assert model.num_params() == model.config.num_params()
    shapes = sorted((m.in_features, m.out_features) for m in model.modules() if isinstance(m, nn.Linear))
    assert shapes == sorted(_linears(model.config) * model.config.n_layers)


def test_structure_that_convert_relies_on():
    model = build_model("tiny")
    lists = [m for m in model.modules() if isinstance(m, nn.ModuleList)]
    assert max(lists, key=len) is model.blocks and len(model.blocks) == model.config.n_layers
    assert isinstance(model.tok_emb, nn.Embedding)
    assert isinstance(model.lm_head, LMHead) and not isinstance(model.lm_head, nn.Linear)
    assert model.lm_head.weight is model.tok_emb.weight          # tied by default for tiny
    names = {n.split(".", 2)[2] for n, m in model.named_modules() if isinstance(m, nn.Linear)}
    assert names == {"attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.o_proj", "mlp.up_proj", "mlp.down_proj"}
    assert all(m.bias is None for m in model.modules() if isinstance(m, nn.Linear))
    untied = build_model("micro", tie_head=False)
    assert untied.lm_head.weight is not untied.tok_emb.weight


@pytest.mark.parametrize("bad,match", [({"d_model": 96, "n_heads": 3, "n_kv_heads": 3}, "multiple of 128"),
                                       ({"n_kv_heads": 3}, "divisible"), ({"mlp": "gelu"}, "mlp"),
                                       ({"d_ff": 200}, "multiple of 128")])
def test_config_rejects_bad_shapes(bad, match):
    with pytest.raises(ValueError, match=match):
        ModelConfig(**bad)


def test_build_model_rejects_unknown_size_and_long_inputs():
    with pytest.raises(ValueError, match="unknown model"):
        build_model("7b")
    model = build_model("micro", max_seq_len=32)
    with pytest.raises(ValueError, match="max_seq_len"):
        model(torch.zeros(1, 33, dtype=torch.long))


def test_forward_is_causal_and_fp32():
    torch.manual_seed(0)
    model = build_model("micro").eval()
    ids = torch.randint(0, 256, (2, 48))
    changed = ids.clone()
    changed[:, 30:] = (changed[:, 30:] + 7) % 256
    with torch.no_grad():
        a, b = model(ids), model(changed)
    assert a.shape == (2, 48, 256) and a.dtype == torch.float32
    torch.testing.assert_close(a[:, :30], b[:, :30], rtol=0, atol=0)
    assert not torch.allclose(a[:, 30:], b[:, 30:])


def test_gqa_equals_mha_with_repeated_kv_heads():
    """n_kv_heads=2 of 4 heads == MHA whose k/v weights repeat each kv head for its query group."""
    torch.manual_seed(0)
    gqa_cfg = ModelConfig(d_model=256, n_layers=1, n_heads=4, n_kv_heads=2, d_ff=256, max_seq_len=64)
    gqa = Transformer(gqa_cfg).eval()
    mha = Transformer(dataclasses.replace(gqa_cfg, n_kv_heads=4)).eval()
    state = gqa.state_dict()
    for key in ("blocks.0.attn.k_proj.weight", "blocks.0.attn.v_proj.weight"):
        state[key] = state[key].view(2, 64, 256).repeat_interleave(2, dim=0).reshape(256, 256)
    mha.load_state_dict(state)
    ids = torch.randint(0, 256, (2, 40))
    with torch.no_grad():
        torch.testing.assert_close(gqa(ids), mha(ids), rtol=1e-5, atol=1e-5)


def test_rope_scores_depend_only_on_relative_position():
    cfg = ModelConfig(max_seq_len=64)
    cos, sin = _rope_tables(cfg)
    q, k = torch.randn(cfg.head_dim), torch.randn(cfg.head_dim)

    def score(m, n):
        qm = _apply_rope(q.view(1, 1, 1, -1), cos[m:m + 1], sin[m:m + 1])
        kn = _apply_rope(k.view(1, 1, 1, -1), cos[n:n + 1], sin[n:n + 1])
        return (qm * kn).sum()

    torch.testing.assert_close(score(5, 2), score(40, 37), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(score(0, 0), (q * k).sum(), rtol=1e-5, atol=1e-5)  # position 0 = identity


def test_rmsnorm_math_and_autocast_dtype():
    norm = RMSNorm(128)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(3, 128)
    want = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + norm.eps) * norm.weight
    torch.testing.assert_close(norm(x), want)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert norm(x).dtype == torch.bfloat16       # block linears get bf16 inputs, any recipe


@pytest.mark.parametrize("recipe", list(PRESETS))
def test_every_preset_converts_the_tiny_model(recipe):
    """Every recipe tiles every block linear (no on_error='skip' needed); head/embedding untouched."""
    import microscale as ms

    model = build_model("tiny")
    report = ms.convert(model, recipe)
    linears = [n for n, m in model.named_modules() if isinstance(m, (nn.Linear, ms.Linear))]
    assert len(report.converted) + sum(k.startswith("blocks.") for k in report.kept) == len(linears)
    assert len(report.converted) >= 6 * (model.config.n_layers - 1)
    assert isinstance(model.lm_head, LMHead) and isinstance(model.tok_emb, nn.Embedding)


@pytest.mark.parametrize("recipe", ["nvfp4", "fp8_blockwise"])
def test_converted_model_trains_a_step(recipe):
    import microscale as ms

    torch.manual_seed(0)
    model = build_model("micro")
    ms.convert(model, recipe, keep_high_precision=[])
    ids = torch.randint(0, 256, (2, 64))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(ids)
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids.flatten()).backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert model.blocks[0].attn.q_proj.weight.grad.abs().sum() > 0


def test_flops_per_token_counts_matmuls_and_attention():
    cfg = MODEL_CONFIGS["125m"]
    matmul = sum(i * o for i, o in _linears(cfg)) * cfg.n_layers + cfg.vocab_size * cfg.d_model
    assert flops_per_token(cfg, 1024) == 6 * matmul + 12 * cfg.n_layers * cfg.d_model * 1024


def test_fused_qkv_is_the_three_projections_stacked():
    """``fused_qkv``: one ``[q; k; v]`` projection (Megatron's layout) with the three matrices'
    parameters; with their weights stacked it computes what the three do, and converts and
    trains like them (GQA: k and v narrower than q)."""
    import microscale as ms
    torch.manual_seed(0)
    three = build_model("small", 64, max_seq_len=32)
    fused = build_model("small", 64, max_seq_len=32, fused_qkv=True)
    assert fused.num_params() == three.num_params() == three.config.num_params()
    weights = three.state_dict()
    state = {k: v for k, v in weights.items() if not k.endswith(("k_proj.weight", "v_proj.weight"))}
    for key in [k for k in state if k.endswith("q_proj.weight")]:
        pre = key[:-len("q_proj.weight")]
        state[pre + "qkv_proj.weight"] = torch.cat([weights[pre + f"{n}_proj.weight"] for n in "qkv"])
        del state[key]
    fused.load_state_dict(state)
    assert fused.blocks[0].attn.qkv_proj.weight.shape == (384 + 2 * 128, 384)
    ids = torch.randint(0, 64, (2, 32))
    torch.testing.assert_close(fused(ids), three(ids))
    ms.convert(fused, "nvfp4", keep_high_precision=[])
    assert isinstance(fused.blocks[0].attn.qkv_proj, ms.Linear)
    fused(ids).float().sum().backward()
    assert fused.blocks[0].attn.qkv_proj.weight.grad.abs().sum() > 0


def _saved_storage_bytes(model, ids) -> int:
    """Bytes of the distinct storages autograd keeps for backward over one forward (a view
    keeps its whole base alive)."""
    storages = {}

    def pack(t):
        s = t.untyped_storage()
        storages[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(ids)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    params |= {b.untyped_storage().data_ptr() for b in model.buffers()}
    return sum(n for ptr, n in storages.items() if ptr not in params)


def test_fused_qkv_keeps_no_more_for_backward_than_three_projections():
    """v goes to attention (which keeps it for backward) as its own tensor, not a view of the
    fused output: a view kept q's and k's pre-RoPE columns alive too (+1.7 GB at 1b on an
    H200, session 47)."""
    torch.manual_seed(0)
    ids = torch.randint(0, 64, (2, 32))
    three = build_model("small", 64, max_seq_len=32)
    fused = build_model("small", 64, max_seq_len=32, fused_qkv=True)
    assert _saved_storage_bytes(fused, ids) <= _saved_storage_bytes(three, ids)
