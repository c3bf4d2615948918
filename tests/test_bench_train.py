"""benchmarks/bench_train.py's pure parts: the profile's kernel kinds and the baseline checks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from script_loader import load_script  # (tests/ is on sys.path)

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_train.py"


def _bench_train():
    return load_script("benchmarks/bench_train.py")


def test_profile_kinds_of_the_grouped_kernels():
    """The profile's kernel kinds: the grouped GEMM's Triton kernels count as GEMM (not as the
    elementwise ``reduce_kernel`` their name contains), the grouped quantizer's passes as
    quantize, the padded layout as its own kind."""
    bt = _bench_train()
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
    bt = _bench_train()
    special = {"_dequant_kernel": "dequantize", "_scale_inplace_kernel": "dequantize",
               "_tables_kernel": "moe layout", "_pad_rows_kernel": "moe layout"}
    names = _kernel_names()
    assert len(names) >= 36 and ("quant_nvfp4_row", "nvfp4_row_kernel") in names
    got = {(mod, n): bt._kind(n) for mod, n in names}
    want = {(mod, n): special.get(n, "quantize" if mod.startswith(("quant_", "sr_bytes"))
                                  else "gemm") for mod, n in names}
    assert got == want


def _row(recipe: str, tok_s: float, model: str = "1b", compile_: str = "blocks") -> dict:
    return {"model": model, "recipe": recipe, "tok_s": tok_s, "compile": compile_,
            "graph": "step"}


def test_baseline_notes():
    """One bf16 run, or bf16 runs of one process more than 2% apart, are named; bf16 runs
    under other compile settings (``--bf16-also``) are not compared with the baseline's."""
    notes = _bench_train().baseline_notes
    one = [_row("bf16", 86925.0), _row("nvfp4", 80131.0)]
    assert len(notes(one)) == 1 and "one bf16 run" in notes(one)[0]
    agree = [_row("bf16", 94605.0), _row("nvfp4", 83553.0), _row("bf16", 94431.0)]
    assert notes(agree) == []
    apart = [_row("bf16", 93000.0), _row("bf16", 88050.0), _row("bf16", 60000.0, compile_="none")]
    (note,) = notes(apart)
    assert "5.6%" in note and "88,050-93,000" in note
    two_models = one + [_row("bf16", 4e5, "125m"), _row("bf16", 3.8e5, "125m")]
    assert [n.split(":")[0] for n in notes(two_models)] == ["125m", "1b"]
    assert notes([_row("nvfp4", 1.0)]) == []


def test_kernel_gaps_count_idle_time_between_kernels_by_the_kind_that_follows():
    """The profile's gaps: idle time between consecutive kernels, overlapping kernels (two
    streams) not counted as a gap, each gap charged to the kernel that ends it."""
    bt = _bench_train()
    spans = [(30, 40, "gemm"), (0, 10, "quantize"), (12, 20, "gemm"), (15, 25, "attention"),
             (41, 50, "quantize")]
    got = bt.kernel_gaps(spans)
    assert got["count"] == 3
    assert got["total_ms"] == pytest.approx((2 + 5 + 1) / 1e3)
    assert got["by_next_kind_ms"] == {"gemm": pytest.approx(7e-3), "quantize": pytest.approx(1e-3)}
    assert got["launches_by_kind"] == {"quantize": 2, "gemm": 2, "attention": 1}
    assert bt.kernel_gaps([]) == {"total_ms": 0.0, "count": 0, "by_next_kind_ms": {},
                                  "launches_by_kind": {}}


def test_ratios_rest_on_the_best_bf16_whatever_its_settings():
    """The baseline is the fastest bf16 row of a model, an ``@`` variant included (session 48:
    ``bf16@three-qkv`` ran 1.2% faster than ``bf16`` with q, k and v fused)."""
    bt = _bench_train()
    rows = [_row("bf16", 92656.0), _row("bf16@three-qkv", 93750.0),
            _row("fp8_blockwise", 110424.0), _row("bf16", 4e5, "125m")]
    for r in rows:
        r["peak_gb"] = 35.5
    bt.add_ratios(rows)
    assert [r["baseline"] for r in rows] == ["bf16@three-qkv"] * 3 + ["bf16"]
    assert rows[2]["x_bf16"] == 110424.0 / 93750.0 and rows[1]["x_bf16"] == 1.0
    assert rows[2]["target"] == bt.TARGETS["1b"]["fp8_blockwise"] and rows[1]["target"] is None
    (note,) = bt.baseline_notes(rows[:3])
    assert "one bf16@three-qkv run" in note


def test_duration_buckets_group_a_kernels_launches_by_size():
    """The profile's quantize-time breakdown: one kernel's launches grouped by duration (two
    significant digits), the buckets with the most time first, other kinds left out."""
    bt = _bench_train()
    launches = [("nvfp4_amax_reg_kernel", 15.2), ("nvfp4_amax_reg_kernel", 14.8),
                ("nvfp4_amax_reg_kernel", 61.0), ("nvfp4_row_kernel", 40.0),
                ("triton_poi_fused_add_0", 500.0), ("_dequant_kernel", 9.0)]
    got = bt.duration_buckets(launches, ("quantize", "dequantize"))
    assert list(got) == ["nvfp4_amax_reg_kernel", "nvfp4_row_kernel", "_dequant_kernel"]
    assert got["nvfp4_amax_reg_kernel"] == [[61.0, 1, 0.061], [15.0, 2, 0.03]]
    assert got["_dequant_kernel"] == [[9.0, 1, 0.009]]


def test_sequence_lists_launches_in_stream_order_with_their_gaps():
    """The profile's launch sequence: sorted by start, [name, µs, idle µs before it]."""
    from types import SimpleNamespace as NS
    bt = _bench_train()

    def event(name, start, end):
        return NS(name=name, time_range=NS(start=start, end=end), device_time=end - start)
    got = bt._sequence([event("b", 3000, 4500), event("a" * 80, 0, 2000),
                        event("c", 4500, 5000)])
    assert got == [["a" * 70, 2000, 0.0], ["b", 1500, 1000], ["c", 500, 0]]


def test_repeat_alternates_the_rows_between_the_bf16_runs():
    bt = _bench_train()
    assert bt.repeated(["bf16", "a", "b", "bf16"], 3) == ["bf16"] + ["a", "b"] * 3 + ["bf16"]
    assert bt.repeated(["a", "b"], 2) == ["a", "b", "a", "b"]
    assert bt.repeated(["bf16@x", "a"], 2) == ["bf16@x", "a", "a"]
    assert bt.repeated(["nvfp4"], 3) == ["nvfp4"] * 3
    assert bt.repeated(["bf16", "a", "bf16"], 1) == ["bf16", "a", "bf16"]


def test_recipe_summary_reports_the_spread_against_the_target():
    """Recipes run more than once get their mean, lowest and highest ratio, and whether the
    mean and every row meet the target (session 55's 1b nvfp4 rows: mean over, one row under)."""
    bt = _bench_train()
    rows = [{"model": "1b", "recipe": "bf16", "x_bf16": 1.0, "target": None}] + [
        {"model": "1b", "recipe": "nvfp4", "x_bf16": x, "target": 0.9}
        for x in (0.9000, 0.8988, 0.9068)] + [
        {"model": "1b", "recipe": "nvfp4_no_sr", "x_bf16": 0.91, "target": 0.8}]
    (s,) = bt.recipe_summary(rows)                  # a recipe run once gets no summary
    assert (s["recipe"], s["rows"], s["min"], s["max"]) == ("nvfp4", 3, 0.8988, 0.9068)
    assert s["mean_x_bf16"] == pytest.approx(0.9018667)
    assert s["mean_meets"] is True and s["every_row_meets"] is False
    rows[1]["target"] = rows[2]["target"] = rows[3]["target"] = None
    assert bt.recipe_summary(rows)[0]["mean_meets"] is None
