"""benchmarks/bench_moe.py runs end to end on CPU (``--smoke``: tiny shapes, moe-tiny)."""

from __future__ import annotations

import importlib.util
import json
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
