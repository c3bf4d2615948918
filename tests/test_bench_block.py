"""benchmarks/bench_block.py on CPU (the micro model, the reference backend): rows in turn,
a kernel set in force while its row is built and restored after, errors per row, ratios."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_block


def test_rows_kernel_sets_and_errors(capsys, monkeypatch):
    from microscale.kernels.quant_nvfp4_config import CONFIG
    default = CONFIG["REG_COL"]["RNE"]["PROGS_PER_SM"]
    seen = []
    build = bench_block.build

    def spy(model, part, recipe, *args):
        seen.append((recipe, CONFIG["REG_COL"]["RNE"]["PROGS_PER_SM"]))
        return build(model, part, recipe, *args)

    monkeypatch.setattr(bench_block, "build", spy)
    bench_block.main(["--model", "micro", "--device", "cpu", "--tokens", "64", "--backend",
                      "reference", "--repeat", "2",
                      "--recipes", "bf16,nvfp4,nvfp4@nv-colrne-p4,nvfp4@bogus"])
    assert seen == [("bf16", default), ("nvfp4", default), ("nvfp4@nv-colrne-p4", 4)]
    assert CONFIG["REG_COL"]["RNE"]["PROGS_PER_SM"] == default
    out = capsys.readouterr().out
    result = json.loads(out.strip().splitlines()[-1])
    rows = {r["recipe"]: r for r in result["rows"]}
    assert list(rows) == ["bf16", "nvfp4", "nvfp4@nv-colrne-p4", "nvfp4@bogus"]
    for name in ("bf16", "nvfp4", "nvfp4@nv-colrne-p4"):
        assert len(rows[name]["times_ms"]) == 2 and rows[name]["ms"] > 0
    assert rows["bf16"]["x_bf16"] == 1.0 and rows["nvfp4"]["x_first"] == 1.0
    assert rows["nvfp4"]["x_bf16"] == rows["bf16"]["ms"] / rows["nvfp4"]["ms"]
    assert "not a kernel set" in rows["nvfp4@bogus"]["error"] and not rows["nvfp4@bogus"][
        "times_ms"]


def test_block_part_trains_its_parameters():
    """``--part block``: the step reaches every parameter of the converted block."""
    import torch
    mod = bench_block.build("micro", "block", "nvfp4", "reference", torch.device("cpu"), False)
    x, dy, extra = bench_block.inputs("micro", "block", 64, 32, torch.device("cpu"))
    assert x.shape == (2, 32, 128) and len(extra) == 2
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = mod(x, *extra)
    y.backward(dy)
    assert all(p.grad is not None for p in mod.parameters())
    assert x.grad is not None
