"""ms.analyze, AnalysisReport, QuantMonitor, plots and the ``analyze`` CLI (CPU, small models)."""

from __future__ import annotations

import argparse
import json
import math

import pytest
import torch
from torch import nn

import microscale as ms
from microscale.analysis import AnalysisReport, QuantMonitor, analyze
from microscale.analysis.metrics import operand_metrics
from microscale.analysis.plots import plot_report
from microscale.train.model import build_model

OPERAND_KEYS = ("fprop.x", "fprop.w", "dgrad.dy", "dgrad.w", "wgrad.dy", "wgrad.x")
OUTPUT_KEYS = ("fprop.y", "dgrad.dx", "wgrad.dw")


def _micro(seed: int = 0):
    torch.manual_seed(seed)
    return build_model("micro", max_seq_len=64)


def _ids(b: int = 2, t: int = 32, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 256, (b, t), generator=torch.Generator().manual_seed(seed))


def _mlp(seed: int = 0, d_in: int = 128, d_hidden: int = 256) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d_in, d_hidden, bias=False), nn.GELU(),
                         nn.Linear(d_hidden, d_in, bias=False))


@pytest.fixture(scope="module")
def micro_nvfp4():
    """(model, its state before, report) of the micro decoder under nvfp4, shared by tests."""
    model = _micro()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    return model, before, analyze(model, _ids(), "nvfp4")


# ------------------------------------------------------------------------------ report structure
def test_report_structure_and_model_untouched(tmp_path, micro_nvfp4):
    model, before, report = micro_nvfp4
    linears = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    assert sorted(report.names) == sorted(linears) and len(report) == 12
    # depth order = execution order: q, k, v, o, up, down of block 0, then block 1
    assert report.names[:6] == [f"blocks.0.attn.{p}_proj" for p in "qkvo"] + \
        ["blocks.0.mlp.up_proj", "blocks.0.mlp.down_proj"]
    assert [row["index"] for row in report.layers] == list(range(12))
    for row in report.layers:
        assert set(row["sqnr_db"]) == set(OPERAND_KEYS + OUTPUT_KEYS)
        for key in OPERAND_KEYS + OUTPUT_KEYS:
            sqnr, rel = row["sqnr_db"][key], row["rel_err"][key]
            assert 5 < sqnr < 40, (row["name"], key, sqnr)     # FP4: ~15-25 dB
            assert sqnr == pytest.approx(-20 * math.log10(rel), rel=1e-9)
        for key in OPERAND_KEYS:
            assert 0 <= row["flush_frac"][key] < 0.5 and 0 <= row["sat_frac"][key] < 0.1
            assert row["scale_min"][key] <= row["scale_median"][key] <= row["scale_max"][key]
        # the 2D weight quantized along `out` is the transpose of the one along `in` (SPEC §3)
        assert row["sqnr_db"]["fprop.w"] == pytest.approx(row["sqnr_db"]["dgrad.w"], abs=1e-9)
    # the model is left as it was: weights, no .grad, no hooks, modes
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())
    assert all(not m._forward_hooks for m in model.modules())
    text = str(report)
    assert "blocks.1.mlp.down_proj" in text and "wgrad.x" in text
    path = tmp_path / "r.json"
    report.to_json(path)
    assert list(tmp_path.iterdir()) == [path]                   # no temp file left behind
    back = AnalysisReport.from_json(path)
    assert back.names == report.names and back.layers[3]["sqnr_db"] == report.layers[3]["sqnr_db"]
    json.dumps(report.to_dict())


def test_hp_gemm_gives_none_and_loss_fn_forms():
    model = _mlp()
    x = torch.randn(4, 16, 128, generator=torch.Generator().manual_seed(0))
    recipe = ms.Recipe.from_name("nvfp4")
    recipe = ms.Recipe("fprop_only", fprop=recipe.fprop)      # dgrad/wgrad in high precision
    r1 = analyze(model, x, recipe, loss_fn=lambda out: out.sum())
    row = r1.layers[0]
    assert row["sqnr_db"]["fprop.x"] is not None and row["rel_err"]["fprop.y"] is not None
    assert all(row["sqnr_db"][k] is None for k in ("dgrad.dy", "wgrad.x", "dgrad.dx", "wgrad.dw"))
    # fprop metrics do not depend on the loss; a two-argument loss_fn also gets the batch
    seen = []
    r2 = analyze(model, x, recipe, loss_fn=lambda out, batch: seen.append(batch) or out.pow(3).mean())
    assert seen[0] is x and r2.layers[0]["sqnr_db"]["fprop.x"] == row["sqnr_db"]["fprop.x"]


@pytest.mark.parametrize("shape", [(3, 7, 128), (1, 16, 128), (37, 128)])
def test_odd_token_counts_are_padded(shape):
    model = _mlp()
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(2))
    report = analyze(model, x, "nvfp4")
    tokens = math.prod(shape[:-1])
    assert report.layers[0]["tokens"] == tokens
    assert 0 < report.layers[1]["rel_err"]["wgrad.dw"] < 0.5


@pytest.mark.parametrize("recipe", ["mxfp8", "fp8_blockwise", "mxfp4", "fp8_tensorwise"])
def test_other_formats(recipe):
    model = _mlp()
    x = torch.randn(2, 128, 128, generator=torch.Generator().manual_seed(3))
    row = analyze(model, x, recipe).layers[0]
    fp8 = recipe != "mxfp4"
    assert row["sqnr_db"]["fprop.x"] > (25 if fp8 else 12)
    if recipe in ("mxfp8", "fp8_blockwise", "mxfp4"):            # ceil/pow-2 scales never clip
        assert row["sat_frac"]["fprop.x"] == 0.0


def test_unsupported_dims_skipped_and_bad_input():
    model = nn.Sequential(nn.Linear(100, 128), nn.ReLU(), nn.Linear(128, 64))
    report = analyze(model, torch.randn(32, 100), "nvfp4")
    assert report.names == ["2"] and report.skipped[0][0] == "0"
    with pytest.raises(TypeError, match="recipe"):
        analyze(model, torch.randn(32, 100), 3)
    with pytest.raises(ValueError, match="no linear"):
        analyze(nn.Sequential(nn.ReLU()), torch.randn(4, 16), "nvfp4")
    with pytest.raises(ValueError, match="pass a recipe"):
        analyze(model, torch.randn(32, 100))
    with pytest.raises(ValueError, match="unknown metric"):
        report.rank("fprop.x/nope")
    with pytest.raises(ValueError, match="budget"):
        report.recommend(1.5)


# ------------------------------------------------------------------------------ metric definitions
def test_flush_saturation_and_zero_scale_by_hand():
    """One row, two 16-blocks; amax 448 makes S_enc = 6, so a block's E4M3 scale is its vmax."""
    x = torch.zeros(1, 48)
    x[0, 0], x[0, 1:16] = 448.0, 1e-3          # block 0: 1e-3·6/448 < 0.25 → 15 values flush
    x[0, 16], x[0, 17] = 9.4, 1.0              # block 1: scale e4m3(9.4) = 9 → 9.4·6/9 > 6: clipped
    x[0, 32:48] = 1e-4                         # block 2: scale e4m3(1e-4) = 0 → whole block flushed
    q = ms.quantize(x, "nvfp4")
    m = operand_metrics(x, q)
    nonzero = 1 + 15 + 2 + 16
    assert m["flush_frac"] == pytest.approx((15 + 16) / nonzero)
    assert m["sat_frac"] == pytest.approx(1 / 48)
    assert m["scale_zero_frac"] == pytest.approx(1 / 3)
    assert m["scale_max"] == pytest.approx(448 / 6) and m["scale_min"] == 0.0
    assert m["amax"] == 448.0


# ------------------------------------------------------------------------------ ranking
def test_rank_and_recommend_are_convertible(micro_nvfp4):
    report = micro_nvfp4[2]
    model = _micro()
    ranked = report.rank()
    assert [v for _, v in ranked] == sorted((v for _, v in ranked), reverse=True)
    by_sqnr = report.rank("wgrad.x/sqnr_db")                   # low SQNR = most sensitive first
    assert [v for _, v in by_sqnr] == sorted(v for _, v in by_sqnr)
    keep = report.recommend(0.15)
    assert len(keep) == math.ceil(0.15 * 12) == 2 and keep == [n for n, _ in ranked[:2]]
    conv = ms.convert(model, "nvfp4", keep_high_precision=keep)
    assert sorted(n for n in conv.kept if n.startswith("blocks")) == sorted(keep)
    assert len(conv.converted) == 12 - len(keep)
    blocks = report.recommend(0.5, by="block")
    assert len(blocks) == 6 and len({n.split(".")[1] for n in blocks}) == 1


def test_converted_model_uses_its_layers(micro_nvfp4):
    ids, ref = _ids(), micro_nvfp4[2]
    converted = _micro()
    ms.convert(converted, "nvfp4", keep_high_precision=["blocks.1.mlp.*"])
    flags = {n: m.high_precision for n, m in converted.named_modules() if isinstance(m, ms.Linear)}
    report = analyze(converted, ids)                            # recipe=None: the layers' own
    assert report.names == [n for n in ref.names if not n.startswith("blocks.1.mlp")]
    assert all(row["converted"] for row in report.layers)
    for row in report.layers:                                   # same weights, same hp capture
        assert row["sqnr_db"] == ref.layers[ref.names.index(row["name"])]["sqnr_db"]
    assert flags == {n: m.high_precision for n, m in converted.named_modules()
                     if isinstance(m, ms.Linear)}
    # with a recipe, the kept nn.Linear layers are analyzed as if converted too
    assert len(analyze(converted, ids, "nvfp4")) == 12


# ------------------------------------------------------------------------------ RHT and 2D
def test_rht_helps_wgrad_on_outlier_tokens():
    """A few tokens ×100: each 16-token block of xᵀ holds one huge value and flushes the rest.

    The RHT spreads the outlier over 16 tokens: far fewer flushes and a smaller dW error. (The
    SQNR of xᵀ itself drops, since it is dominated by the outliers that 1×16 blocks without the
    RHT encode almost exactly; the benefit is in what the GEMM computes.)"""
    model = _mlp(seed=4)
    x = torch.randn(2, 64, 128, generator=torch.Generator().manual_seed(4))
    x[:, [5, 40], :] *= 100
    with_rht = analyze(model, x, "nvfp4").layers
    no_rht = analyze(model, x, "nvfp4_no_rht").layers
    for a, b in zip(with_rht, no_rht):
        assert a["flush_frac"]["wgrad.x"] < 0.25 * b["flush_frac"]["wgrad.x"]
        assert a["flush_frac"]["wgrad.dy"] < 0.25 * b["flush_frac"]["wgrad.dy"]
        assert a["rel_err"]["wgrad.dw"] < b["rel_err"]["wgrad.dw"]
        assert a["sqnr_db"]["fprop.x"] == b["sqnr_db"]["fprop.x"]   # fprop does not use the RHT


@pytest.mark.parametrize("outliers", [False, True])
def test_1x16_weight_blocks_beat_16x16(outliers):
    model = _mlp(seed=5)
    if outliers:                               # a few input channels of W scaled ×100
        with torch.no_grad():
            model[0].weight[:, [3, 50, 77]] *= 100
    x = torch.randn(2, 64, 128, generator=torch.Generator().manual_seed(5))
    two_d = analyze(model, x, "nvfp4").layers[0]
    one_d = analyze(model, x, "nvfp4_no_2d").layers[0]
    # outlier columns of W sit inside W's 1×16 blocks (fprop) but span whole rows of Wᵀ (dgrad)
    assert one_d["sqnr_db"]["fprop.w"] >= two_d["sqnr_db"]["fprop.w"] + (3.0 if outliers else 0.0)
    assert one_d["sqnr_db"]["dgrad.w"] >= two_d["sqnr_db"]["dgrad.w"]
    assert one_d["rel_err"]["fprop.y"] <= two_d["rel_err"]["fprop.y"]
    assert one_d["sqnr_db"]["fprop.x"] == two_d["sqnr_db"]["fprop.x"]


# ------------------------------------------------------------------------------ monitor
def _train(monitor, steps: int = 3) -> tuple[list[float], nn.Module, list]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 64))
    ms.convert(model, "nvfp4", keep_high_precision=[])          # SR draws from the global RNG
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses, records = [], []
    for step in range(1, steps + 1):
        x = torch.randn(32, 64)
        loss = (model(x) - x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if monitor is not None:
            records.append(monitor(step, model, x))
            assert all(p.grad is None for p in model.parameters())
    return losses, model, records


@pytest.mark.parametrize("eval_mode", [True, False])
def test_monitor_does_not_change_training(eval_mode):
    base_losses, base_model, _ = _train(None)
    mon = QuantMonitor(every=2, metrics=("sqnr_db", "flush_frac", "sensitivity"),
                       loss_fn=lambda out, x: (out - x).pow(2).mean(), eval_mode=eval_mode)
    losses, model, records = _train(mon)
    assert losses == base_losses
    assert all(torch.equal(a, b) for a, b in zip(base_model.parameters(), model.parameters()))
    assert records[0] is None and records[2] is None and records[1]
    rec = records[1]
    assert rec["q/0/wgrad.x/sqnr_db"] > 5 and "q/3/fprop.w/flush_frac" in rec
    assert "q/0/sensitivity" in rec and "q/0/fprop.w/sqnr_db" in rec
    assert all(isinstance(v, float) and math.isfinite(v) for v in rec.values())
    assert model.training and all(m.training for m in model.modules())


def test_monitor_in_the_trainer(tmp_path):
    from microscale.train.trainer import TrainConfig, Trainer
    text = tmp_path / "corpus.txt"
    text.write_bytes(bytes(range(32, 127)) * 200)
    runs = {}
    for tag, monitor in (("plain", None), ("monitored", QuantMonitor(every=2, keys=("wgrad.x",)))):
        cfg = TrainConfig(recipe="nvfp4", model="micro", steps=3, batch_size=2, seq_len=32,
                          data=str(text), out=str(tmp_path / tag), eval_every=100, eval_batches=1,
                          ckpt_every=0, progress=False)
        Trainer(cfg, monitor=monitor).fit()
        runs[tag] = [json.loads(line) for line in (tmp_path / tag / "metrics.jsonl").read_text().splitlines()]
    assert [r["loss"] for r in runs["plain"]] == [r["loss"] for r in runs["monitored"]]
    logged = runs["monitored"][1]
    assert logged["step"] == 2 and "q/blocks.0.attn.q_proj/wgrad.x/sqnr_db" in logged
    assert not any(k.startswith("q/") for k in runs["monitored"][0])
    # `microscale analyze --checkpoint` rebuilds the converted run and analyzes its layers
    from microscale.train.cli import main
    out = tmp_path / "an"
    assert main(["analyze", "--checkpoint", str(tmp_path / "plain"), "--batch-size", "2",
                 "--seq-len", "32", "--out", str(out)]) == 0
    saved = AnalysisReport.from_json(out / "analysis.json")
    assert saved.recipe == "nvfp4" and any(row["converted"] for row in saved.layers)


def test_monitor_validates_arguments():
    with pytest.raises(ValueError, match="every"):
        QuantMonitor(every=0)
    with pytest.raises(ValueError, match="metric"):
        QuantMonitor(metrics=("snr",))
    with pytest.raises(ValueError, match="key"):
        QuantMonitor(keys=("fprop.q",))


# ------------------------------------------------------------------------------ plots and CLI
def test_plots_are_pngs(tmp_path, micro_nvfp4):
    paths = plot_report(micro_nvfp4[2], tmp_path)
    assert len(paths) == 2
    for p in paths:
        with open(p, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_cli_analyze(tmp_path, capsys):
    from microscale.analysis.cli import register
    text = tmp_path / "corpus.txt"
    text.write_bytes(bytes(range(32, 127)) * 200)
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    out = tmp_path / "out"
    args = parser.parse_args(["analyze", "--model", "micro", "--recipe", "nvfp4", "--batch-size", "2",
                              "--seq-len", "32", "--data", str(text), "--out", str(out),
                              "--budget", "0.25"])
    assert args.func(args) == 0
    keep = json.loads((out / "recommend.json").read_text())["keep_high_precision"]
    assert len(keep) == 3
    assert {p.name for p in out.iterdir()} >= {"analysis.json", "analysis_heatmap.png",
                                                "analysis_depth.png", "recommend.json"}
    assert "keep in high precision" in capsys.readouterr().out
