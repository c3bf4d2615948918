"""The training loop, exact resume, checkpoints, divergence handling and the CLI (micro model, CPU)."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch._inductor.config  # noqa: F401  (the config.patch decorator below)

import microscale as ms
from microscale.train import checkpoint as ckpt_mod
from microscale.train.cli import main
from microscale.train.data import stdlib_corpus
from microscale.train.model import build_model
from microscale.train.trainer import DivergenceError, TrainConfig, Trainer, keep_hp_arg, lr_at

MAX_BYTES = 200_000


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("corpus")


@pytest.fixture(scope="module")
def data(cache):
    return stdlib_corpus(cache, max_bytes=MAX_BYTES)


def _cfg(out, **kw) -> TrainConfig:
    base = dict(model="micro", steps=10, batch_size=2, seq_len=64, lr=3e-3, eval_every=5, eval_batches=2,
                ckpt_every=5, out=str(out), device="cpu", max_bytes=MAX_BYTES, progress=False)
    return TrainConfig(**(base | kw))


def _records(out) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


# ----------------------------------------------------------------------------- LR schedules
def test_cosine_schedule_warms_up_then_decays_to_min():
    cfg = TrainConfig(steps=100, lr=1.0, warmup=10, min_lr_ratio=0.1)
    lrs = [lr_at(s, cfg) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert lrs[10] == pytest.approx(1.0) and all(a >= b for a, b in zip(lrs[10:], lrs[11:]))
    assert lrs[55] == pytest.approx(0.55)             # halfway through the cosine: (1 + 0.1) / 2
    assert 0.1 <= lrs[-1] < 0.1005


def test_wsd_schedule_is_flat_then_linear_to_min():
    cfg = TrainConfig(steps=100, lr=1.0, warmup=5, lr_schedule="wsd", decay_frac=0.2, min_lr_ratio=0.0)
    lrs = [lr_at(s, cfg) for s in range(100)]
    assert cfg.decay_start == 80
    assert all(v == 1.0 for v in lrs[5:80])
    assert lrs[80] == pytest.approx(0.95) and lrs[89] == pytest.approx(0.5) and lrs[99] == pytest.approx(0.0)


def test_config_validation():
    with pytest.raises(ValueError, match="lr_schedule"):
        TrainConfig(lr_schedule="linear")
    with pytest.raises(ValueError, match="steps"):
        TrainConfig(steps=0)
    assert TrainConfig(steps=200).warmup == 10
    assert keep_hp_arg("none") == [] and keep_hp_arg("first:2, last:8") == ["first:2", "last:8"]
    assert keep_hp_arg("last_fraction:0.15") == "last_fraction:0.15" and keep_hp_arg(None) is None


# ----------------------------------------------------------------------------- end to end
def test_train_writes_metrics_config_and_checkpoints(tmp_path, data):
    out = tmp_path / "run"
    final = Trainer(_cfg(out), data=data).fit()
    recs = _records(out)
    assert [r["step"] for r in recs] == list(range(1, 11))
    for key in ("loss", "tokens", "lr", "grad_norm", "tok_per_s", "mem_mb"):
        assert all(math.isfinite(r[key]) for r in recs), key
    assert recs[3]["tokens"] == 4 * 2 * 64
    assert [r["step"] for r in recs if "val_loss" in r] == [5, 10]
    assert final == recs[-1]
    assert recs[-1]["loss"] < recs[0]["loss"] - 0.5            # it learns (starts near ln 256 = 5.5)
    config = json.loads((out / "config.json").read_text())
    assert config["recipe"] == "bf16" and config["model_config"]["d_model"] == 128
    names = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert names == ["step_000005.json", "step_000005.safetensors", "step_000010.json", "step_000010.safetensors"]


class _Interrupt(Exception):
    pass


def _crash_at(step: int):
    def monitor(s, model, batch):
        if s == step:
            raise _Interrupt
        return None
    return monitor


@pytest.mark.parametrize("recipe", ["bf16", "nvfp4"])
def test_resume_reproduces_the_uninterrupted_losses_exactly(tmp_path, data, recipe):
    """Crash after step 7 (checkpoint at 5), resume: every loss equals the straight run's, bit for bit."""
    straight = tmp_path / "straight"
    Trainer(_cfg(straight, recipe=recipe), data=data).fit()
    broken = tmp_path / "broken"
    with pytest.raises(_Interrupt):
        Trainer(_cfg(broken, recipe=recipe), monitor=_crash_at(7), data=data).fit()
    assert [r["step"] for r in _records(broken)] == [1, 2, 3, 4, 5, 6]
    Trainer(_cfg(broken, recipe=recipe, resume=True), data=data).fit()
    a, b = _records(straight), _records(broken)
    assert [r["step"] for r in b] == list(range(1, 11))          # records past the checkpoint were redone
    for key in ("loss", "grad_norm", "lr", "tokens"):
        assert [r[key] for r in a] == [r[key] for r in b], key
    assert [r.get("val_loss") for r in a] == [r.get("val_loss") for r in b]


def test_resume_refuses_a_different_run(tmp_path, data):
    out = tmp_path / "run"
    Trainer(_cfg(out, steps=5), data=data).fit()
    with pytest.raises(ValueError, match="seed"):
        Trainer(_cfg(out, steps=8, seed=1, resume=True), data=data).fit()
    with pytest.raises(ValueError, match="recipe"):          # refused before any state is loaded
        Trainer(_cfg(out, steps=8, recipe="nvfp4", resume=True), data=data).fit()
    Trainer(_cfg(out, steps=8, resume=True), data=data).fit()      # more steps: allowed
    assert [r["step"] for r in _records(out)] == list(range(1, 9))


def test_monitor_dict_is_merged_and_forces_a_record(tmp_path, data):
    def monitor(step, model, batch):
        x, y = batch
        assert x.shape == (2, 64) and torch.equal(x[:, 1:], y[:, :-1])
        return {"probe": float(step)} if step % 3 == 0 else None

    out = tmp_path / "run"
    Trainer(_cfg(out, log_every=4, eval_every=100, ckpt_every=0), monitor=monitor, data=data).fit()
    recs = _records(out)
    assert [r["step"] for r in recs] == [3, 4, 6, 8, 9, 10]
    assert [r.get("probe") for r in recs] == [3.0, None, 6.0, None, 9.0, None]


def test_nan_loss_stops_with_step_and_last_checkpoint(tmp_path, data):
    def poison(step, model, batch):
        if step == 6:
            with torch.no_grad():
                model.tok_emb.weight.fill_(float("nan"))

    out = tmp_path / "run"
    with pytest.raises(DivergenceError, match=r"loss is nan at step 7") as err:
        Trainer(_cfg(out, ckpt_every=3), monitor=poison, data=data).fit()
    assert err.value.step == 7 and err.value.checkpoint == out / "checkpoints" / "step_000006.json"
    assert str(err.value.checkpoint) in str(err.value)


def test_cli_exits_nonzero_on_divergence(tmp_path, cache, capsys):
    code = main(["train", "--model", "micro", "--steps", "6", "--batch-size", "2", "--seq-len", "64",
                 "--lr", "1e30", "--warmup", "1", "--grad-clip", "0", "--max-bytes", str(MAX_BYTES),
                 "--cache-dir", str(cache), "--out", str(tmp_path / "run"), "--device", "cpu", "--no-progress"])
    assert code == 3
    assert "at step" in capsys.readouterr().err


def test_precision_switch_and_keep_hp_are_wired(tmp_path, data):
    trainer = Trainer(_cfg(tmp_path / "run", recipe="nvfp4", steps=3, switch_step=2, switch_mode="all",
                           keep_hp="none", eval_every=100, ckpt_every=0), data=data)
    assert len(trainer.report.converted) == 12 and not any(k.startswith("blocks") for k in trainer.report.kept)
    layers = [m for m in trainer.model.modules() if isinstance(m, ms.Linear)]
    trainer.fit()
    assert layers and all(m.high_precision for m in layers)


def test_checkpoint_round_trip_keeps_ties_and_layer_state(tmp_path):
    torch.manual_seed(0)
    model = build_model("micro")
    ms.convert(model, "nvfp4")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randint(0, 256, (2, 32))).sum().backward()
    opt.step()
    model.blocks[0].attn.q_proj.hp_fprop = True
    paths = [ckpt_mod.save_checkpoint(tmp_path, s, model, opt, {"note": s}, keep=2) for s in (1, 2, 3)]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "step_000002.json", "step_000002.safetensors", "step_000003.json", "step_000003.safetensors"]
    assert ckpt_mod.latest_checkpoint(tmp_path) == paths[-1]

    torch.manual_seed(1)
    fresh = build_model("micro")
    ms.convert(fresh, "nvfp4")
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=1e-3)
    meta = ckpt_mod.load_checkpoint(paths[-1], fresh, fresh_opt)
    assert meta["note"] == 3 and fresh.lm_head.weight is fresh.tok_emb.weight
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        if torch.is_tensor(a):
            torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
    assert fresh.blocks[0].attn.q_proj.hp_fprop
    sa, sb = opt.state_dict(), fresh_opt.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    for i in sa["state"]:
        for key in sa["state"][i]:
            torch.testing.assert_close(sa["state"][i][key], sb["state"][i][key], rtol=0, atol=0)


def test_compare_and_plot_cli(tmp_path, cache, capsys):
    out = tmp_path / "cmp"
    code = main(["compare", "--recipes", "bf16,nvfp4", "--model", "micro", "--steps", "6", "--batch-size", "2",
                 "--seq-len", "64", "--eval-every", "3", "--eval-batches", "1", "--max-bytes", str(MAX_BYTES),
                 "--cache-dir", str(cache), "--out", str(out), "--device", "cpu", "--no-progress"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "| bf16 |" in printed and "| nvfp4 |" in printed
    for name in ("loss.png", "rel_diff.png", "summary.md", "summary.json", "bf16/metrics.jsonl", "nvfp4/config.json"):
        assert (out / name).exists(), name
    rows = {r["recipe"]: r for r in json.loads((out / "summary.json").read_text())["runs"]}
    assert rows["bf16"]["val_gap"] == 0.0
    b, n = _records(out / "bf16"), _records(out / "nvfp4")
    assert rows["nvfp4"]["val_loss"] == n[-1]["val_loss"]
    assert rows["nvfp4"]["val_gap"] == pytest.approx((n[-1]["val_loss"] - b[-1]["val_loss"]) / b[-1]["val_loss"])
    assert b[0]["loss"] != n[0]["loss"]                       # same batch, different arithmetic
    (out / "loss.png").unlink()
    (out / "rel_diff.png").unlink()
    assert main(["plot", str(out)]) == 0
    assert (out / "loss.png").stat().st_size > 1000 and (out / "rel_diff.png").exists()


def test_grad_accum_matches_one_batch_and_quantizes_weights_once(tmp_path, data, monkeypatch):
    """``grad_accum=2`` splits each batch in two: the losses track the one-batch run (only the
    loss mean's summation order differs) and each layer quantizes its weights once a step."""
    from microscale.nn.linear import Linear
    fills = []
    real = Linear.set_weight_cache        # each layer's cached views, one by one or many at once
    monkeypatch.setattr(Linear, "set_weight_cache",
                        lambda self, *a: fills.append(1) or real(self, *a))
    runs, filled = {}, {}
    for n in (1, 2):
        out = tmp_path / f"accum{n}"
        fills.clear()
        Trainer(_cfg(out, recipe="nvfp4_no_sr", steps=4, batch_size=4, log_every=1,
                     ckpt_every=0, grad_accum=n, keep_hp="none"), data=data).fit()
        runs[n], filled[n] = [r["loss"] for r in _records(out) if "loss" in r], len(fills)
    assert len(runs[2]) == 4
    assert runs[2] == pytest.approx(runs[1], rel=2e-3)
    layers = sum(isinstance(m, Linear) for m in Trainer(_cfg(tmp_path / "n", recipe="nvfp4_no_sr",
                                                              keep_hp="none"), data=data).model.modules())
    assert filled[2] == 4 * layers                   # once per step and layer, not per micro-batch
    assert filled[1] == 4 * layers                   # small NVFP4 weights grouped without it too
    with pytest.raises(ValueError, match="grad_accum"):
        _cfg(tmp_path / "bad", batch_size=3, grad_accum=2)


def test_fp8_blockwise_weights_grouped_per_step_train_the_same(tmp_path, data, monkeypatch):
    """fp8_blockwise without gradient accumulation: the harness quantizes all 128x128 weights
    in one call per step (ms.weight_cache); the losses equal the per-layer run bit for bit."""
    from microscale.train import trainer as trainer_mod
    grouped = Trainer(_cfg(tmp_path / "g", recipe="fp8_blockwise", steps=4), data=data)
    assert grouped._group_weights
    grouped.fit()
    monkeypatch.setattr(trainer_mod, "groups_weights", lambda model: False)
    plain = Trainer(_cfg(tmp_path / "p", recipe="fp8_blockwise", steps=4), data=data)
    assert not plain._group_weights
    plain.fit()
    for key in ("loss", "grad_norm"):
        assert [r[key] for r in _records(tmp_path / "g")] == \
            [r[key] for r in _records(tmp_path / "p")], key


@pytest.mark.slow
@torch._inductor.config.patch(emulate_precision_casts=True)   # restored after (a monkeypatch
def test_compiled_training_matches_eager_and_check_compile_stops_a_fault(tmp_path, data, caplog,
                                                                        monkeypatch):
    """``--compile on`` (Inductor, one graph per block, custom ops inside) trains like eager:
    the first loss is bit-identical with SR off; later ones move only by the fp32 reduction
    order of the compiled norms (documented), and records carry tokens/s. Its
    ``--check-compile`` compared compiled and eager gradients at the first step and at the
    precision switch on the way. A compiled-only fault (here: the norms' outputs detached
    while compiling, standing in for session 10's zero gradients on CUDA) stops the run
    before it trains. (One test: the compiles are most of its time.)"""
    import logging

    from microscale.train import model as zoo
    torch._dynamo.reset()
    # both runs on torch's own bf16 GEMMs (an eager CPU run would take train/cpu_gemm.py's
    # fp32 ones, a compiled run Inductor's): the comparison is of the compiled blocks alone
    monkeypatch.setenv("MICROSCALE_CPU_BF16_GEMM", "native")
    cfg = dict(recipe="nvfp4_no_sr", steps=4, switch_step=2, switch_mode="all", eval_every=100,
               ckpt_every=0)
    runs = {}
    with caplog.at_level(logging.INFO, logger="microscale.train.trainer"):
        for mode in ("off", "on"):
            trainer = Trainer(_cfg(tmp_path / mode, compile=mode, check_compile=mode == "on",
                                   **cfg), data=data)
            trainer.fit()
            assert trainer.compiled == (mode == "on")
            runs[mode] = _records(tmp_path / mode)
    eager, compiled = ([r["loss"] for r in runs[m]] for m in ("off", "on"))
    assert len(eager) == 4 and compiled[0] == eager[0]
    assert compiled == pytest.approx(eager, rel=1e-4)
    assert all(r["tok_per_s"] > 0 for r in runs["on"])
    agreed = [r.message for r in caplog.records if "--check-compile at step" in r.message]
    assert [m.split(":")[0] for m in agreed] == ["--check-compile at step 0",
                                                 "--check-compile at step 2"]
    forward = zoo.RMSNorm.forward

    def detached_when_compiled(self, x):
        out = forward(self, x)
        return out.detach() if torch.compiler.is_compiling() else out

    torch._dynamo.reset()
    monkeypatch.setattr(zoo.RMSNorm, "forward", detached_when_compiled)
    with pytest.raises(RuntimeError, match="step 0: the compiled blocks' gradients disagree.*"
                                           "zero or no gradient for .*attn_norm"):
        Trainer(_cfg(tmp_path / "bad", compile="on", check_compile=True, **cfg), data=data).fit()
    torch._dynamo.reset()
    with pytest.raises(ValueError, match="compile must be"):
        _cfg(tmp_path, compile="yes")
    with pytest.raises(ValueError, match="check_compile compares"):
        _cfg(tmp_path, check_compile=True, dist="fsdp")
