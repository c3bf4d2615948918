"""MoE models: convert quantizes the fused experts of transformers 5's Mixtral, Qwen2-MoE,
Qwen3-MoE and DeepSeek-V3 (tiny random configs) and of the zoo, keeps routers and gates in
high precision with a reason; the zoo's MoE decoder trains; expert weights shard under FSDP2."""

from __future__ import annotations

import os
import socket
import warnings

import pytest
import torch

import microscale as ms
from microscale.nn.experts import QuantizedExperts
from microscale.train.model import build_model

tf = pytest.importorskip("transformers")

_COMMON = {"vocab_size": 256, "hidden_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64}


def _hf(kind: str):
    torch.manual_seed(0)
    if kind == "mixtral":
        return tf.MixtralForCausalLM(tf.MixtralConfig(
            intermediate_size=64, num_local_experts=4, num_experts_per_tok=2, **_COMMON))
    if kind == "qwen2_moe":
        return tf.Qwen2MoeForCausalLM(tf.Qwen2MoeConfig(
            intermediate_size=64, moe_intermediate_size=32, shared_expert_intermediate_size=64,
            num_experts=4, num_experts_per_tok=2, **_COMMON))
    if kind == "qwen3_moe":
        return tf.Qwen3MoeForCausalLM(tf.Qwen3MoeConfig(
            intermediate_size=64, moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2,
            head_dim=16, **_COMMON))
    return tf.DeepseekV3ForCausalLM(tf.DeepseekV3Config(
        intermediate_size=64, moe_intermediate_size=32, n_routed_experts=4, num_experts_per_tok=2,
        n_group=2, topk_group=1, n_shared_experts=1, first_k_dense_replace=0, kv_lora_rank=32,
        q_lora_rank=None, qk_rope_head_dim=32, qk_nope_head_dim=32, v_head_dim=32,
        **(_COMMON | {"num_key_value_heads": 4})))


@pytest.mark.parametrize("kind", ["mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v3"])
def test_hf_moe_experts_converted(kind):
    model = _hf(kind)
    ids = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(0))
    ref = model(ids).logits
    with warnings.catch_warnings():
        warnings.simplefilter("error")                   # no "mostly high precision" warning
        report = ms.convert(model, "mxfp8", keep_high_precision=[])
    experts = [n for n, m in model.named_modules() if isinstance(m, QuantizedExperts)]
    assert experts == [f"model.layers.{i}.mlp.experts" for i in range(2)]
    assert set(experts) <= set(report.converted)
    routers = [n for n in report.kept if n.endswith("mlp.gate.weight")]
    assert len(routers) == 2 and all("MoE router" in report.kept[n] for n in routers)
    if kind == "qwen2_moe":                                 # the 1-output shared-expert gate
        assert "router or gate" in report.kept["model.layers.0.mlp.shared_expert_gate"]
    assert report.gemm_share.quantized / report.gemm_share.total > 0.9
    out = model(ids).logits
    assert ((out - ref).norm() / ref.norm()) < 0.1
    out.float().square().mean().backward()
    assert model.model.layers[0].mlp.experts.gate_up_proj.grad.abs().sum() > 0


def test_hf_experts_forward_matches_unquantized():
    """QuantizedExperts with a high-precision recipe runs HF's routing exactly (fp32)."""
    model = _hf("mixtral")
    ids = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(1))
    ref = model(ids).logits
    ms.convert(model, ms.Recipe.from_name("bf16", compute_dtype=torch.float32),
               keep_high_precision=[])
    torch.testing.assert_close(model(ids).logits, ref, atol=1e-5, rtol=1e-5)


def test_experts_state_dict_loads_into_the_original():
    model = _hf("qwen3_moe")
    ms.convert(model, "nvfp4", keep_high_precision=[])
    state = {k: v for k, v in model.state_dict().items() if not k.endswith("_extra_state")}
    fresh = _hf("qwen3_moe")
    fresh.load_state_dict(state, strict=True)               # same keys and shapes


def test_zoo_moe_trains_quantized(single_thread):
    """moe-tiny with NVFP4: every expert and linear quantized (the router kept, with its
    reason), and the loss goes down in a few steps."""
    torch.manual_seed(0)
    model = build_model("moe-tiny")
    report = ms.convert(model, "nvfp4", keep_high_precision=[])
    assert all(isinstance(b.mlp.experts, QuantizedExperts) for b in model.blocks)
    in_blocks = {n: why for n, why in report.kept.items() if n.startswith("blocks.")}
    assert sorted(in_blocks) == ["blocks.0.mlp.router.weight", "blocks.1.mlp.router.weight"]
    assert all("MoE router" in why for why in in_blocks.values())
    assert report.gemm_share.kept_other / report.gemm_share.total < 0.01
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    data = torch.randint(0, 64, (2, 33), generator=g)       # a small repeated batch
    losses = []
    for _ in range(5):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(data[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), data[:, 1:].flatten())
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.2, losses
    keys = {k for k, _ in ms.explain(model).items()}
    assert ("quantize_grouped", "nvfp4|nvfp4") in keys and ("grouped_scaled_mm",
                                                            "nvfp4xnvfp4") in keys


def _fsdp_worker(rank: int, world: int, port: int, results) -> None:
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Shard

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = build_model("moe-tiny")
    ms.convert(model, "mxfp8", keep_high_precision=[])
    plain = build_model("moe-tiny")
    ms.convert(plain, "mxfp8", keep_high_precision=[])
    plain.load_state_dict(model.state_dict())
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    gu = model.blocks[0].mlp.experts.gate_up_proj
    sharded = gu.placements == (Shard(0),) and gu.to_local().shape[0] == 4 // world
    ids = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(0))
    loss = model(ids).float().square().mean()
    loss.backward()
    ref = plain(ids).float().square().mean()
    ref.backward()
    full_grad = gu.grad.full_tensor()
    ok = sharded and torch.allclose(loss, ref) and \
        torch.allclose(full_grad, plain.blocks[0].mlp.experts.gate_up_proj.grad, atol=1e-6)
    results.put((rank, bool(ok)))
    dist.destroy_process_group()


def test_fsdp2_shards_experts_on_dim0():
    import torch.multiprocessing as mp

    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available in this build")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    procs = [ctx.Process(target=_fsdp_worker, args=(r, 2, port, results)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    got = sorted(results.get(timeout=5) for _ in procs)
    assert got == [(0, True), (1, True)]


@pytest.mark.parametrize("kind,recipe", [("mixtral", "nvfp4"), ("qwen3_moe", "mxfp8"),
                                         ("deepseek_v3", "fp8_delayed")])
def test_save_pretrained_round_trip_restores_quantized_experts(tmp_path, kind, recipe):
    """save_pretrained -> from_pretrained gives the same QuantizedExperts (recipe, switches,
    delayed-scaling histories, masters) and bit-identical logits. transformers 5 saves Mixtral's
    experts under its legacy names (block_sparse_moe.experts.N.w1...) and renames them on load,
    the experts' _extra_state with them; a bf16 load is refused (the masters would round)."""
    from microscale.integrations.transformers import from_pretrained

    model = _hf(kind)
    ms.convert(model, recipe, keep_high_precision=[])
    ids = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(1))
    model(ids).logits.float().sum().backward()          # delayed histories move off zero
    model.model.layers[1].mlp.experts.hp_fprop = True
    model.save_pretrained(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                   # the record lists the experts too
        again = from_pretrained(tf.AutoModelForCausalLM, tmp_path)
    for name, mod in model.named_modules():
        if isinstance(mod, QuantizedExperts):
            back = again.get_submodule(name)
            assert isinstance(back, QuantizedExperts) and back.recipe == mod.recipe
            assert back.hp_fprop == mod.hp_fprop
            assert torch.equal(back.get_extra_state(), mod.get_extra_state())   # histories too
            if recipe == "fp8_delayed":
                assert any(b.abs().sum() > 0 for k, b in back.named_buffers()
                           if k.startswith("delayed_"))
            for (k, t), (k2, t2) in zip(mod.state_dict().items(), back.state_dict().items()):
                assert k == k2 and torch.equal(t, t2), k
    model.eval(), again.eval()
    with torch.no_grad():
        assert torch.equal(model(ids).logits, again(ids).logits)
    with pytest.raises(ValueError, match="experts need their fp32 masters"):
        from_pretrained(tf.AutoModelForCausalLM, tmp_path, dtype=torch.bfloat16)


def test_compressed_tensors_export_refuses_quantized_experts(tmp_path):
    """Not written yet: a clear error, not experts silently exported in bf16."""
    model = _hf("qwen3_moe")
    ms.convert(model, "nvfp4", keep_high_precision=[])
    with pytest.raises(ValueError, match="quantized MoE experts.*save_pretrained instead"):
        ms.export(model, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_renamed_extra_states_pair_by_layer_numbers_or_refuse():
    """A saved _extra_state that transformers renamed on load pairs with the one loaded key of
    the same layer numbers and module name; two candidates are refused, not guessed."""
    from microscale.integrations.transformers import _model_names

    bare = torch.nn.Module()
    loaded = {"m.0.mlp.experts._extra_state", "m.1.mlp.experts._extra_state", "m.0.w.weight"}
    assert _model_names(bare, ["m.1.moe.experts", "m.0.moe.experts"], loaded) == {
        "m.0.moe.experts": "m.0.mlp.experts", "m.1.moe.experts": "m.1.mlp.experts"}
    two = {"m.0.mlp.experts._extra_state", "m.0.shared.experts._extra_state"}
    with pytest.raises(ValueError, match="cannot tell which layer"):
        _model_names(bare, ["m.0.moe.experts", "m.0.alt.experts"], two)


def test_zoo_moe_blocks_share_one_compiled_graph():
    """Regional compile: every MoE block reuses one graph (a per-block guard on the experts'
    name made moe-1b hit the recompile limit on an H200). Guards are Dynamo's, whatever the
    backend, so this traces with ``aot_eager``; the Inductor-compiled MoE blocks are
    test_schedule's (and, on CUDA, test_grouped_gpu's)."""
    from microscale.train.speed import compile_blocks
    torch._dynamo.reset()
    model = build_model("moe-tiny", max_seq_len=64)
    ms.convert(model, "fp8_blockwise")
    compile_blocks(model, backend="aot_eager")
    ids = torch.randint(0, 256, (2, 64))
    with torch._dynamo.config.patch(recompile_limit=1), \
            torch.autocast("cpu", dtype=torch.bfloat16):
        model(ids).float().sum().backward()
    torch._dynamo.reset()
    assert len(model.blocks) >= 2
