"""The NVFP4 amax pass alone, as training launches it, under several launch configurations.

    python benchmarks/bench_amax_pass.py                       # training's shapes, every config
    python benchmarks/bench_amax_pass.py --shapes 16384x8192 --configs 0,1

Training measures two amaxes of each NVFP4 operand in one read before quantizing it
(``quant_nvfp4._reg_amax``: ``max|x|`` for the row view and ``max|RHT(x)|`` along 16-row
column blocks for the wgrad view; per-program maxima, the RHT without its input clamp). At 1b
that pass took 7.0 ms of nvfp4's 195 ms step on the H200 (session 47): ~2.4 TB/s of reads by
session 50's estimate (the step's NVFP4 activations and gradients, ~16.5 GB, over that time)
where the device copies at ~4.3 TB/s, so not at the memory limit there (its launch, 3 programs
an SM, was chosen on an H100 in session 18). This times the pass at
the zoo's activation shapes (16384 tokens) for each ``CONFIG["REG_AMAX"]`` override below,
graph-replayed, and checks that every configuration gives the default's two amaxes bit for
bit (maxima do not depend on the order). ``GB/s`` counts x read once; ``%copy`` is that
against the device's copy rate (read + written) measured in the same process. Prints a table
and ends with one JSON line. Needs CUDA.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

from microscale.kernels import quant_nvfp4  # noqa: E402

SHAPES = [(16384, 2048), (16384, 8192), (16384, 768), (16384, 3072), (8192, 8192)]
# overrides of quant_nvfp4.CONFIG["REG_AMAX"]; the first is the default
CONFIGS = [{}, {"PAIRS": False}, {"PROGS_PER_SM": 4}, {"PROGS_PER_SM": 4, "maxnreg": 128},
           {"PROGS_PER_SM": 5, "maxnreg": 96}, {"NUM_STAGES": 3},
           {"num_warps": 8, "PROGS_PER_SM": 2}, {"num_warps": 8, "PROGS_PER_SM": 2, "BC": 64},
           {"NI": 8, "PROGS_PER_SM": 6}, {"NI": 8, "PROGS_PER_SM": 4, "NUM_STAGES": 3}]


def _launch(x2: torch.Tensor) -> torch.Tensor:
    """The pass as training's quantize call launches it: per-program maxima ``[2 · programs]``
    (row view's, column view's), which the quantize launch after it reduces."""
    return quant_nvfp4._reg_amax(x2, [True, True], True, (None, 0), True)


def _amaxes(x2: torch.Tensor) -> torch.Tensor:
    return _launch(x2).view(-1, 2).amax(0)


def run(shapes, configs, dev) -> list[dict]:
    base = dict(quant_nvfp4.CONFIG["REG_AMAX"])
    copy_gbs = common.copy_bandwidth_gbs(dev)
    print(common.env_header(), f"| copy rate {copy_gbs:.0f} GB/s")
    rows = []
    try:
        for r, c in shapes:
            x = torch.randn(r, c, device=dev, dtype=torch.bfloat16) * 3
            want = None
            for i in configs:
                quant_nvfp4.CONFIG["REG_AMAX"] = {**base, **CONFIGS[i]}
                row = {"shape": f"{r}x{c}", "config": i, "override": str(CONFIGS[i] or "default")}
                try:
                    got = _amaxes(x)
                    want = got if want is None else want
                    us = common.graph_ms(lambda: _launch(x)) * 1e3
                    gbs = r * c * 2 / us / 1e3
                    row.update(us=round(us, 1), gbs=round(gbs),
                               pct_copy=round(100 * gbs / copy_gbs, 1),
                               same=bool(torch.equal(got, want)))
                except Exception as err:          # a launch this device cannot run
                    row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:80]}"
                rows.append(row)
    finally:
        quant_nvfp4.CONFIG["REG_AMAX"] = base
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=None, help="e.g. 16384x2048,16384x8192")
    ap.add_argument("--configs", default=None, help="comma-separated indices of CONFIGS")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_amax_pass needs a CUDA device")
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")] \
        if args.shapes else SHAPES
    configs = [int(i) for i in args.configs.split(",")] if args.configs else range(len(CONFIGS))
    rows = run(shapes, list(configs), torch.device("cuda"))
    print(common.fmt_table(rows, ["shape", "config", "override", "us", "gbs", "pct_copy", "same",
                                  "error"]))
    common.json_line({"bench": "amax_pass", "rows": rows})


if __name__ == "__main__":
    main()
