"""Round trips of converted Hugging Face models: save_pretrained / from_pretrained, Trainer
checkpoints and resume, safetensors save_model, torch.save + weights_only load, FSDP2 + DCP.

Tiny models built from configs (no Hub access); logits after each round trip must be
bit-identical to the saved model's.
"""

from __future__ import annotations

import json
import os
import time
import warnings

import pytest
import torch

import microscale as ms

transformers = pytest.importorskip("transformers")

from microscale.integrations.transformers import from_pretrained  # noqa: E402
from microscale.nn.record import apply_record, safetensors_metadata  # noqa: E402

VOCAB = 128

pytestmark = pytest.mark.usefixtures("single_thread")


def llama(**overrides):
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64,
                                   **overrides)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg)


def gpt2():
    cfg = transformers.GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4,
                                  n_positions=64, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(cfg)


def converted(build=llama, recipe="nvfp4", **kwargs):
    model = build()
    ms.convert(model, recipe, **kwargs)
    return model


def ids(seed=1):
    return torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(seed))


def logits(model, x):
    model.eval()
    with torch.no_grad():
        return model(input_ids=x).logits


def quantized_layers(model) -> dict[str, ms.Linear]:
    return {n: m for n, m in model.named_modules() if isinstance(m, ms.Linear)}


def train_step(model, x):
    model.train()
    model(input_ids=x, labels=x).loss.backward()


# ---------------------------------------------------------------------------- save_pretrained
@pytest.mark.parametrize("build, recipe", [(llama, "nvfp4"), (gpt2, "mxfp8"),
                                           (llama, "fp8_delayed")])
def test_save_pretrained_from_pretrained_bit_identical(tmp_path, build, recipe):
    model = converted(build, recipe)
    train_step(model, ids(2))                                 # delayed histories move
    assert all(isinstance(v, torch.Tensor) for v in model.state_dict().values())
    model.save_pretrained(tmp_path)
    expected = logits(model, ids())
    record = json.loads((tmp_path / "config.json").read_text())["microscale"]
    assert set(record["converted"]) == set(quantized_layers(model))
    assert record["recipes"][recipe]["name"] == recipe and "lm_head" in record["kept"]

    again = from_pretrained(transformers.AutoModelForCausalLM, tmp_path)
    assert torch.equal(logits(again, ids()), expected)
    old, new = quantized_layers(model), quantized_layers(again)
    assert old.keys() == new.keys()
    for name, layer in new.items():
        assert type(layer) is type(old[name]) and layer.recipe == old[name].recipe
        for key, value in layer.delayed_state().items():
            assert torch.equal(value, old[name].delayed_state()[key]), (name, key)
    plain = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)   # still loads plainly
    assert not quantized_layers(plain)


def test_from_pretrained_keeps_exact_masters_under_dtype(tmp_path):
    model = converted()
    model.save_pretrained(tmp_path)
    again = from_pretrained(transformers.AutoModelForCausalLM, tmp_path, dtype=torch.bfloat16)
    assert again.model.embed_tokens.weight.dtype == torch.bfloat16
    q = again.model.layers[0].self_attn.q_proj
    assert q.weight.dtype == torch.float32
    assert torch.equal(q.weight, model.model.layers[0].self_attn.q_proj.weight)


def test_from_pretrained_refuses_what_it_cannot_rebuild_and_follows_the_weights(tmp_path):
    plain = llama()
    plain.save_pretrained(tmp_path / "plain")
    with pytest.raises(ValueError, match="no microscale layers"):
        from_pretrained(transformers.AutoModelForCausalLM, tmp_path / "plain")
    with pytest.raises(ValueError, match="not a local directory"):
        from_pretrained(transformers.AutoModelForCausalLM, tmp_path / "missing")
    model = converted()
    model.save_pretrained(tmp_path / "q")
    cfg = json.loads((tmp_path / "q" / "config.json").read_text())
    cfg["microscale"]["converted"]["model.layers.0.mlp.extra"] = "nvfp4"
    (tmp_path / "q" / "config.json").write_text(json.dumps(cfg))
    with pytest.warns(UserWarning, match="disagree.*model.layers.0.mlp.extra.*following the "
                                         "weights"):
        again = from_pretrained(transformers.AutoModelForCausalLM, tmp_path / "q")
    assert quantized_layers(again).keys() == quantized_layers(model).keys()


def test_reload_converts_exactly_the_saved_layers_even_a_hand_converted_head(tmp_path):
    model = converted(llama, "mxfp8")
    model.lm_head = ms.Linear.from_linear(model.lm_head, "nvfp4", name="lm_head")   # by hand
    model.save_pretrained(tmp_path)
    with pytest.warns(UserWarning, match="only in the weights: \\['lm_head'\\]"):   # stale record
        again = from_pretrained(transformers.AutoModelForCausalLM, tmp_path)
    assert again.lm_head.recipe.name == "nvfp4"
    assert torch.equal(logits(again, ids()), logits(model, ids()))
    record = {"recipes": {"k": ms.Recipe.from_name("nvfp4").to_dict()},
              "converted": {"model.layers.0.nope": "k"}}
    with pytest.raises(ValueError, match="does not have"):
        apply_record(llama(), record)
    record["converted"] = {"model.layers.0.input_layernorm": "k"}
    with pytest.raises(ValueError, match="LlamaRMSNorm, not a Linear"):
        apply_record(llama(), record)


# ---------------------------------------------------------------------------- other writers
def test_safetensors_save_model_and_record_metadata(tmp_path):
    from safetensors import safe_open
    from safetensors.torch import load_model, save_model

    model = converted(llama, "nvfp4")
    path = str(tmp_path / "m.safetensors")
    save_model(model, path, metadata=safetensors_metadata(model))
    with safe_open(path, "pt") as f:
        record = json.loads(f.metadata()["microscale"])
    fresh = llama()
    apply_record(fresh, record)
    load_model(fresh, path)
    assert quantized_layers(fresh).keys() == quantized_layers(model).keys()
    assert torch.equal(logits(fresh, ids()), logits(model, ids()))


def test_tied_gpt2_safetensors_and_torch_save_weights_only(tmp_path):
    from safetensors.torch import load_model, save_model

    model = converted(gpt2, "mxfp8")
    save_model(model, str(tmp_path / "m.safetensors"))          # shared wte/lm_head handled
    torch.save(model.state_dict(), tmp_path / "m.pt")
    for load in ("safetensors", "torch"):
        fresh = converted(gpt2, "mxfp8")
        with torch.no_grad():
            for p in fresh.parameters():
                p.zero_()
        if load == "safetensors":
            load_model(fresh, str(tmp_path / "m.safetensors"))
        else:
            fresh.load_state_dict(torch.load(tmp_path / "m.pt", weights_only=True))
        assert torch.equal(logits(fresh, ids()), logits(model, ids())), load


# ---------------------------------------------------------------------------- Trainer
class _Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        x = torch.randint(0, VOCAB, (16,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": x, "labels": x}


def _trainer(model, out):
    args = transformers.TrainingArguments(
        output_dir=str(out), max_steps=4, save_steps=2, per_device_train_batch_size=4,
        learning_rate=1e-3, logging_steps=1, report_to=[], use_cpu=True, seed=0,
        disable_tqdm=True)
    return transformers.Trainer(model=model, args=args, train_dataset=_Tokens())


def test_trainer_periodic_checkpoints_resume_and_reload(tmp_path):
    model = converted(llama, "nvfp4")                         # SR on: resume restores the RNG
    _trainer(model, tmp_path).train()
    assert sorted(os.listdir(tmp_path)) == ["checkpoint-2", "checkpoint-4"]
    final = {k: v.clone() for k, v in model.state_dict().items()}

    resumed = converted(llama, "nvfp4")
    _trainer(resumed, tmp_path).train(resume_from_checkpoint=str(tmp_path / "checkpoint-2"))
    for k, v in resumed.state_dict().items():
        assert torch.equal(v, final[k]), k

    reloaded = from_pretrained(transformers.AutoModelForCausalLM, tmp_path / "checkpoint-4")
    assert torch.equal(logits(reloaded, ids()), logits(model, ids()))


# ---------------------------------------------------------------------------- FSDP2 + DCP
def _fsdp_worker(rank: int, world: int, ckpt: str, port: int, results) -> None:
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                         set_model_state_dict)
    from torch.distributed.fsdp import fully_shard

    torch.set_num_threads(1)         # a forked child must not enter the parent's OpenMP pool
    warnings.simplefilter("ignore")
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)

    def build():
        model = converted(llama, "fp8_delayed")
        for layer in model.model.layers:
            fully_shard(layer)
        return fully_shard(model)

    full = StateDictOptions(full_state_dict=True, cpu_offload=True)
    model = build()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    train_step(model, ids(2))                           # same batch on both ranks: the delayed
    opt.step()                                          # histories agree (no amax all-reduce)
    saved = get_model_state_dict(model, options=full)
    dcp.save(get_model_state_dict(model), checkpoint_id=ckpt)
    fresh = build()
    state = get_model_state_dict(fresh)
    dcp.load(state, checkpoint_id=ckpt)
    set_model_state_dict(fresh, state)
    loaded = get_model_state_dict(fresh, options=full)
    ok = all(isinstance(v, torch.Tensor) for v in saved.values()) \
        and saved.keys() == loaded.keys() and all(torch.equal(saved[k], loaded[k]) for k in saved)
    ok = ok and torch.equal(logits(model, ids()), logits(fresh, ids()))
    results.put((rank, ok, sum(k.endswith("_extra_state") for k in saved)))
    dist.destroy_process_group()


def test_fsdp2_full_and_dcp_state_dicts(tmp_path):
    import socket

    import torch.multiprocessing as mp

    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available in this build")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    results = mp.get_context("fork").SimpleQueue()      # fork inherits the imports: ~3 s
    procs = mp.start_processes(_fsdp_worker, args=(2, str(tmp_path / "dcp"), port, results),
                               nprocs=2, start_method="fork", join=False)
    deadline = time.monotonic() + 120
    while not procs.join(timeout=1):
        if time.monotonic() > deadline:
            for p in procs.processes:
                p.kill()
            pytest.fail("FSDP2 workers did not finish in 120 s")
    got = sorted(results.get() for _ in range(2))
    # fp8_delayed converts all 2 × 7 linears; the full (cpu_offload) state dict is rank 0's only
    assert got == [(0, True, 14), (1, True, 0)]
