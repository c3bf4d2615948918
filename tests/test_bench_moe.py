"""benchmarks/bench_moe.py runs end to end on CPU (``--smoke``: tiny shapes, moe-tiny)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_moe.py"


@pytest.mark.usefixtures("single_thread")
def test_bench_moe_smoke(capsys):
    spec = importlib.util.spec_from_file_location("bench_moe", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
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
    spec = importlib.util.spec_from_file_location("bench_moe", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = bench.main(["--smoke", "--recipes", "", "--train-recipes", "torchao_moe_rowwise"])
    row = result["train"][1]
    assert row["recipe"] == "torchao_moe_rowwise" and "step_ms" in row, row
    assert converted == ["rowwise"] and calls      # dense linears and experts both swapped
    assert all(len(shape) == 3 for shape in calls)  # [E, K, N] expert weights


def test_pad_token_groups_keeps_every_group_product():
    """The padded grouped GEMM gives each expert's rows the product they had unpadded, empty
    experts and groups of 1 and 17 rows included."""
    import torch
    spec = importlib.util.spec_from_file_location("bench_train", BENCH.parent / "bench_train.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
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
    spec = importlib.util.spec_from_file_location("bench_train", BENCH.parent / "bench_train.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
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


def test_profile_kinds_of_the_grouped_kernels():
    """The profile's kernel kinds: the grouped GEMM's Triton kernels count as GEMM (not as the
    elementwise ``reduce_kernel`` their name contains), the grouped quantizer's passes as
    quantize, the padded layout as its own kind."""
    spec = importlib.util.spec_from_file_location("bench_train", BENCH.parent / "bench_train.py")
    bt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bt)
    want = {"_tokens_kernel": "gemm", "_reduce_kernel": "gemm", "_quant_kernel": "quantize",
            "_amax_kernel": "quantize", "_sr_bytes_kernel": "quantize",
            "_pad_rows_kernel": "moe layout", "_alpha_mm_tma_kernel": "gemm",
            "void at::native::reduce_kernel<512, 1>": "norm+elementwise",
            # cuDNN's attention backward runs these beside its flash kernel
            "void cudnn::fusion::compute_dot_do_o_specialized<true, 64>(void const*": "attention",
            "void cudnn::fusion::convert_dq_to_16bits<true>(void const*, void*": "attention"}
    assert {name: bt._kind(name) for name in want} == want


def _kernel_names() -> list[tuple[str, str]]:
    """(module, name) of every Triton or Gluon kernel in ``microscale.kernels``, from the source
    (a ``@triton.jit`` / ``@gluon.jit`` function whose name ends in ``_kernel``)."""
    root = BENCH.parents[1] / "src" / "microscale" / "kernels"
    jit = re.compile(r"^\s*@(?:triton|gluon)\.jit[^\n]*\n(?:\s*@[^\n]*\n)*\s*def (\w+_kernel)\(",
                     re.M)
    return [(path.stem, name) for path in sorted(root.glob("*.py"))
            for name in jit.findall(path.read_text())]


def test_profile_kinds_of_every_kernel():
    """Every kernel the package launches has its profile kind: a quantizer's as quantize, a
    GEMM's as GEMM, the dequantize and α passes as dequantize, the MoE layout as its own; none
    falls to "other" (the NVFP4 row kernel did, sessions 31-45, so the profiles of those
    sessions under-counted NVFP4's quantize time by that kernel's share)."""
    spec = importlib.util.spec_from_file_location("bench_train", BENCH.parent / "bench_train.py")
    bt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bt)
    special = {"_dequant_kernel": "dequantize", "_scale_inplace_kernel": "dequantize",
               "_tables_kernel": "moe layout", "_pad_rows_kernel": "moe layout"}
    names = _kernel_names()
    assert len(names) >= 36 and ("quant_nvfp4_row", "nvfp4_row_kernel") in names
    got = {(mod, n): bt._kind(n) for mod, n in names}
    want = {(mod, n): special.get(n, "quantize" if mod.startswith(("quant_", "sr_bytes"))
                                  else "gemm") for mod, n in names}
    assert got == want
