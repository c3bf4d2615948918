"""benchmarks/bench_moe.py runs end to end on CPU (``--smoke``: tiny shapes, moe-tiny)."""

from __future__ import annotations

import json

import pytest
from script_loader import load_script  # (tests/ is on sys.path)


@pytest.mark.usefixtures("single_thread")
def test_bench_moe_smoke(capsys):
    bench = load_script("benchmarks/bench_moe.py")
    result = bench.main(["--smoke", "--recipes", "nvfp4,fp8_blockwise",
                         "--train-recipes", "mxfp8"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(last)["bench"] == "moe"
    variants = {r["variant"] for r in result["gemm"]}
    assert variants == {"bf16", "nvfp4", "fp8_blockwise"}
    assert all("fwd_bwd_ms" in r for r in result["gemm"]), result["gemm"]
    assert [r["recipe"] for r in result["train"]] == ["bf16", "mxfp8"]
    assert all("step_ms" in r for r in result["train"]), result["train"]


@pytest.mark.usefixtures("single_thread")
def test_torchao_moe_peer_swaps_the_experts_grouped_gemm(capsys, monkeypatch):
    """``--train-recipes torchao_moe_rowwise`` routes every expert GEMM through torchao's
    differentiable grouped GEMM (here a stand-in with its signature, counting calls: torchao's
    FP8 kernels need a GPU) and its float8 training for the dense linears."""
    import sys
    import types

    import torch
    calls = []

    def fake_fp8_rowwise(a, b_t, offs, out_dtype=torch.bfloat16,
                         pad_token_groups_for_grouped_mm=True):
        # torchao 0.18's checks: its own padding asserts, groups of 16, B column-major
        assert not pad_token_groups_for_grouped_mm, "not yet supported"
        assert offs.dtype == torch.int32 and b_t.stride(1) == 1
        assert bool((torch.diff(offs, prepend=offs.new_zeros(1)) % 16 == 0).all())
        calls.append(tuple(b_t.shape))
        return torch._grouped_mm(a, b_t, offs=offs).to(out_dtype)
    moe = types.ModuleType("torchao.prototype.moe_training")
    moe._to_fp8_rowwise_then_scaled_grouped_mm = fake_fp8_rowwise
    fp8 = types.ModuleType("torchao.float8")
    converted = []
    fp8.Float8LinearConfig = types.SimpleNamespace(from_recipe_name=lambda name: name)
    fp8.convert_to_float8_training = lambda model, config, module_filter_fn: converted.append(config)
    for name, mod in (("torchao", types.ModuleType("torchao")),
                      ("torchao.prototype", types.ModuleType("torchao.prototype")),
                      ("torchao.prototype.moe_training", moe), ("torchao.float8", fp8)):
        monkeypatch.setitem(sys.modules, name, mod)
    bench = load_script("benchmarks/bench_moe.py")
    result = bench.main(["--smoke", "--recipes", "", "--train-recipes", "torchao_moe_rowwise"])
    row = result["train"][1]
    assert row["recipe"] == "torchao_moe_rowwise" and "step_ms" in row, row
    assert converted == ["rowwise"] and calls      # dense linears and experts both swapped
    assert all(len(shape) == 3 for shape in calls)  # [E, K, N] expert weights


def test_pad_token_groups_keeps_every_group_product():
    """The padded grouped GEMM gives each expert's rows the product they had unpadded, empty
    experts and groups of 1 and 17 rows included."""
    import torch
    bench = load_script("benchmarks/bench_train.py")
    g = torch.Generator().manual_seed(0)
    counts = torch.tensor([1, 0, 17, 16, 3])
    offs = torch.cumsum(counts, 0).to(torch.int32)
    x = torch.randn(int(counts.sum()), 32, generator=g)
    w_t = torch.randn(5, 32, 16, generator=g)
    x_pad, rows, offs_pad = bench.pad_token_groups(x, offs)
    assert offs_pad.tolist() == [16, 16, 48, 64, 80] and torch.equal(x_pad[rows], x)
    want = torch.cat([x[s:e] @ w_t[i] for i, (s, e) in
                      enumerate(zip([0, *offs[:-1].tolist()], offs.tolist()))])
    got = torch._grouped_mm(x_pad, w_t, offs=offs_pad)[rows]
    torch.testing.assert_close(got, want)


def test_torchao_moe_probe_raises_when_the_hook_never_runs(monkeypatch):
    """A model whose experts do not call the swapped-in grouped GEMM fails the probe (a run
    would otherwise time bf16 under torchao's name)."""
    import sys
    import types

    import torch
    bench = load_script("benchmarks/bench_train.py")
    moe = types.ModuleType("torchao.prototype.moe_training")
    moe._to_fp8_rowwise_then_scaled_grouped_mm = \
        lambda a, b_t, offs, out_dtype=None: torch._grouped_mm(a, b_t, offs=offs).to(out_dtype)
    monkeypatch.setitem(sys.modules, "torchao.prototype.moe_training", moe)
    from microscale.train.model import build_model
    from microscale.train.moe import Experts, _torch_grouped_mm
    model = build_model("moe-tiny")
    bench.torchao_moe_experts(model)
    bench._probe_torchao_moe(model, torch.device("cpu"))          # the hook runs: passes
    assert model._torchao_moe_calls[0] > 0
    model._torchao_moe_calls[0] = 0
    for m in model.modules():
        if isinstance(m, Experts):
            m.grouped_mm = _torch_grouped_mm                       # the hook bypassed
    with pytest.raises(RuntimeError, match="never ran"):
        bench._probe_torchao_moe(model, torch.device("cpu"))
