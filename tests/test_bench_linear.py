"""benchmarks/bench_linear.py's rows on a tiny shape (CPU): names, kernel-set and compile rows,
errors reported per row, the JSON line."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_linear


def test_rows_settings_and_errors(capsys):
    bench_linear.main(["--device", "cpu", "--tiny", "--recipes",
                       "fp8_blockwise,nvfp4_no_sr@alpha-off,nvfp4@bogus,bf16@alpha-off"])
    out = capsys.readouterr().out
    result = json.loads(out.strip().splitlines()[-1])
    rows = {r["recipe"]: r for r in result["rows"]}
    assert list(rows) == ["bf16", "fp8_blockwise", "nvfp4_no_sr@alpha-off", "nvfp4@bogus",
                          "bf16@alpha-off"]
    for name in ("bf16", "fp8_blockwise", "nvfp4_no_sr@alpha-off"):
        assert rows[name]["ms"] > 0 and rows[name]["graph_ms"] is None   # no graphs off CUDA
        assert rows[name]["saved_bytes"] > 0 and "error" not in rows[name]
    assert "neither 'compile' nor a kernel set" in rows["nvfp4@bogus"]["error"]
    assert "takes only '@compile'" in rows["bf16@alpha-off"]["error"]
    assert "<=0.62" in out and "graph ms" in out


def test_kernel_set_is_restored():
    """A row's kernel set holds while that row runs, and is undone after it."""
    from microscale.kernels.gemm_paths import EPILOGUE
    before = dict(EPILOGUE)
    seen = []
    orig = bench_linear._time_row

    def spy(row, *args):
        seen.append(dict(EPILOGUE))
        return orig(row, *args)

    bench_linear._time_row = spy
    try:
        bench_linear.run("nvfp4_no_sr@alpha-off", 64, 256, 384, bench_linear.torch.device("cpu"),
                         True)
    finally:
        bench_linear._time_row = orig
    assert seen[0]["alpha"] is False and EPILOGUE == before
