"""Target program for Nsight Compute: each NVFP4 quantize variant of a training step, once.

    ncu --clock-control none -k regex:nvfp4_rows --section SpeedOfLight ... \
        python benchmarks/ncu_nvfp4.py --shape 16384x768
    python benchmarks/ncu_nvfp4.py --sass OUTDIR     # registers, spills, SASS opcode counts

The variants are the ones a quantized linear layer runs (amax given, so only the quantize
pass launches): ``dy`` rows SR + columns RHT+SR, ``x`` rows RNE + columns RHT, ``w`` 16x16
rows + columns, ``row`` / ``row_sr`` a 1x16 RNE / SR row view alone written as codes (the row
kernel, ``quant_nvfp4_row``); ``mx8_x`` / ``mx8_dy`` the MXFP8 pairs a layer asks for (x: the
row view expanded; dy: both): ``bench_quant``'s ``mxfp8/rowcol_x`` / ``mxfp8/rowcol_dy``;
``fp8_pair`` the FP8 1x128 pair (``fp8_block/1x128_rowcol``), the MXFP8 pairs' yardstick.
Each runs twice (the first call compiles).
``--sass`` reads the compiled kernels back from Triton's cache and writes, per kernel,
registers per thread, spills and a histogram of SASS opcodes (cuobjdump), so instructions
per element can be counted without hardware counters.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import torch

import microscale as ms

NF = {"check_finite": False}


def variants(amax: torch.Tensor) -> dict:
    g = {**NF} if amax is None else {**NF, "amax": amax}
    return {
        "dy": (("nvfp4", {**g, "stochastic": True}),
               ("nvfp4", {**g, "rht": True, "stochastic": True})),
        "x": (("nvfp4", g), ("nvfp4", {**g, "rht": True})),
        "w": (("nvfp4", {**g, "block_2d": True}), ("nvfp4", {**g, "block_2d": True})),
        "row": (("nvfp4", g), None),
        "row_sr": (("nvfp4", {**g, "stochastic": True}), None),
    }


# the MXFP8 pairs and the FP8 pair, as bench_quant times them (views written expanded go
# through the op layer)
BENCH = {"mx8_x": "mxfp8/rowcol_x", "mx8_dy": "mxfp8/rowcol_dy",
         "fp8_pair": "fp8_block/1x128_rowcol"}


def sass_stats(out: Path) -> None:
    """Per cached ``nvfp4`` cubin: registers, spills, opcode histogram (top 40)."""
    cache = Path(os.environ.get("TRITON_CACHE_DIR", Path.home() / ".triton" / "cache"))
    report = {}
    for cubin in sorted(cache.rglob("*.cubin")):
        if "nvfp4" not in cubin.name and "dequant" not in cubin.name:
            continue
        meta = json.loads(cubin.with_suffix(".json").read_text()) if cubin.with_suffix(
            ".json").exists() else {}
        sass = subprocess.run(["cuobjdump", "-sass", str(cubin)], capture_output=True,
                              text=True).stdout
        res = subprocess.run(["cuobjdump", "-res-usage", str(cubin)], capture_output=True,
                             text=True).stdout
        ops = collections.Counter(m.group(1).split(".")[0] for m in
                                  re.finditer(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", sass))
        key = f"{cubin.parent.name[:8]}/{cubin.stem}"
        report[key] = {"constants": {k: v for k, v in meta.get("constants", {}).items()}
                       if isinstance(meta.get("constants"), dict) else None,
                       "num_warps": meta.get("num_warps"), "resources": res.strip()[-400:],
                       "n_instr": sum(ops.values()), "ops": dict(ops.most_common(40))}
    out.mkdir(parents=True, exist_ok=True)
    (out / "sass_nvfp4.json").write_text(json.dumps(report, indent=1))
    for k, v in report.items():
        print(k, v["num_warps"], v["n_instr"], v["resources"].splitlines()[-1] if v["resources"] else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="16384x768")
    ap.add_argument("--only", default="dy,x,w,row")
    ap.add_argument("--sass", default=None, help="write SASS statistics to this directory")
    ap.add_argument("--amax-pass", action="store_true",
                    help="no amax given: the amax pass runs before each quantize pass")
    ap.add_argument("--dtype", default="bfloat16", help="input dtype (float32: a master weight)")
    ap.add_argument("--kernels", default="",
                    help="kernel settings for this run: a name of bench_train.KERNEL_SETS "
                         "(e.g. mx8-s2)")
    args = ap.parse_args()
    from bench_train import kernel_settings
    with kernel_settings(f"@{args.kernels}" if args.kernels else ""):
        run(args)
    if args.sass:
        sass_stats(Path(args.sass))


def run(args) -> None:
    """Each variant asked for by ``--only``, twice, on one random ``--shape`` tensor."""
    rows, cols = (int(v) for v in args.shape.split("x"))
    x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, args.dtype))
    amax = None if args.amax_pass else x.float().abs().amax()
    for name, (row, col) in variants(amax).items():
        if name in args.only.split(","):
            for _ in range(2):
                ms.quantize_rowcol(x, row, col, backend="triton")
    for name, bench_name in BENCH.items():
        if name in args.only.split(","):
            from bench_quant import VARIANTS
            for _ in range(2):
                VARIANTS[bench_name][0](x, "triton")
    torch.cuda.synchronize()


if __name__ == "__main__":
    sys.exit(main())
