"""Every weight of a zoo model quantized in one launch vs one launch per weight (FP8 128×128,
MXFP8, NVFP4 16×16).

    python benchmarks/bench_many.py                      # 125m and 1b weight sets, H100/H200
    python benchmarks/bench_many.py --models 125m --sweep   # + kernel configs of the one launch
    python benchmarks/bench_many.py --fmt fp8_block,mxfp8,mxfp8_expanded   # MXFP8's too
    python benchmarks/bench_many.py --fmt nvfp4 --models 1b    # NVFP4's two launches (amax, W)
    python benchmarks/bench_many.py --device cpu --models micro  # smoke (TRITON_INTERPRET=1)

What ``ms.weight_cache`` does once per step for ``fp8_blockwise`` (``kernels/quant_many.py``:
its register tile and, as a second row, the old tile code),
against ``quantize_rowcol`` per weight as the layers do without it: both views (W and its
transpose), fp32 masters, graph-replayed (no host time). The copy rate of the same bytes (fp32
read once, both FP8 views and their scales written) is the roof. Prints a table, ends with one
JSON line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

import microscale as ms  # noqa: E402
from microscale.kernels import quant_many, quant_many_nvfp4  # noqa: E402
from microscale.ops import quantize_views  # noqa: E402
from microscale.ops_many import quantize_views_many  # noqa: E402
from microscale.train.model import MODEL_CONFIGS  # noqa: E402

# --fmt: the weights' views and the bytes an element writes (both views, their scales per
# element): FP8 128x128 (the default), MXFP8 as codes, MXFP8 written expanded (bf16, as the
# weight cache holds small models' weights; one launch only)
VIEWS = {"fp8_block": ((ms.QFormat.FP8_BLOCK, {"block": (128, 128), "check_finite": False}),
                       2 + 8 / 16384),
         "mxfp8": ((ms.QFormat.MXFP8_E4M3, {"check_finite": False}), 2 + 2 / 32),
         "mxfp8_expanded": ((ms.QFormat.MXFP8_E4M3, {"check_finite": False, "expand": True}),
                            4 + 2 / 32),
         # NVFP4 16x16 weights: W alone, expanded (bf16) with a scale byte per row and 16
         # columns (Wᵀ is its transpose); the roof counts the fp32 masters read once, as
         # above, though both launches read them (amax, then W)
         "nvfp4": ((ms.QFormat.NVFP4, {"block_2d": True, "check_finite": False,
                                       "expand": True}), 2 + 1 / 16)}
VIEW = VIEWS["fp8_block"][0]
# NVFP4's two launches: aligned (session 55) and table-addressed (session 26); --sweep adds
# programs an SM and warps
NV_CONFIGS = [{"ALIGNED": True}, {"ALIGNED": False}]
NV_SWEEP = [{"ALIGNED": True, "PROGS_PER_SM": p, "num_warps": w} for p in (4, 8, 16)
            for w in (4, 8)]
# the one launch's configs: the register tile (KERNEL "reg", the default since session 46) and
# the old 128x128 tile code ("tile") at its warps and programs an SM
SWEEP = [{"KERNEL": "reg", "num_warps_reg": w, "PROGS_PER_SM_reg": p} for w in (4, 8)
         for p in (1, 2)] + [{"KERNEL": "tile", "num_warps": w, "PROGS_PER_SM": p}
                             for w in (4, 8) for p in (1, 2, 4)]
KEYS = {"reg": ("num_warps_reg", "PROGS_PER_SM_reg"), "tile": ("num_warps", "PROGS_PER_SM")}


def weights(model: str, device) -> list[torch.Tensor]:
    """The block linears' fp32 weights ``[out, in]`` of a zoo model (q, k, v, o, up, down)."""
    cfg = MODEL_CONFIGS[model]
    d, kv, ffn = cfg.d_model, cfg.kv_dim, cfg.hidden_dim
    shapes = [(d, d), (kv, d), (kv, d), (d, d), (ffn, d), (d, ffn)] * cfg.n_layers
    g = torch.Generator(device=device).manual_seed(0)
    return [torch.randn(s, device=device, generator=g) * 0.02 for s in shapes]


def _time(fn, device) -> float:
    if device.type == "cuda":
        t = common.graph_ms(fn)
        return t if t is not None else common.bench_ms(fn)
    return common.bench_ms(fn)


def run(model: str, device, sweep: bool, fmt: str = "fp8_block") -> list[dict]:
    ws = weights(model, device)
    view, written = VIEWS[fmt]
    nbytes = sum(w.numel() * (4 + written) for w in ws)
    rate = common.copy_bandwidth_gbs(device) if device.type == "cuda" else None
    rows = []
    if fmt == "nvfp4":                  # as the layers do: one view each, amax and W launches
        per_layer = _time(lambda: [quantize_views(w, view, None, "auto") for w in ws], device)
        rows.append({"model": model, "fmt": fmt, "variant": "per weight", "ms": per_layer})
    elif not view[1].get("expand"):     # (an internal option of the many op: no per-weight row)
        per_layer = _time(lambda: [ms.quantize_rowcol(w, view, view) for w in ws], device)
        rows.append({"model": model, "fmt": fmt, "variant": "per weight", "ms": per_layer})
    module = quant_many_nvfp4 if fmt == "nvfp4" else quant_many
    configs = (NV_SWEEP if sweep else NV_CONFIGS) if fmt == "nvfp4" else \
        [{}] if fmt != "fp8_block" else SWEEP if sweep else [{"KERNEL": "reg"}, {"KERNEL": "tile"}]
    saved = dict(module.CONFIG)
    try:
        for cfg in configs:
            module.CONFIG.update(cfg)
            t = _time(lambda: quantize_views_many(ws, view, view, "auto"), device)
            rows.append({"model": model, "fmt": fmt, "variant": f"one launch {_shown(fmt)}",
                         "ms": t})
    finally:
        module.CONFIG.clear()
        module.CONFIG.update(saved)
    for r in rows:
        r["weights"], r["params_M"] = len(ws), sum(w.numel() for w in ws) / 1e6
        r["GB/s"] = nbytes / r["ms"] / 1e6
        r["%copy"] = 100 * r["GB/s"] / rate if rate else None
    return rows


def _shown(fmt: str) -> dict:
    """The one launch's config as the row names it."""
    if fmt == "nvfp4":
        return dict(quant_many_nvfp4.CONFIG)
    if fmt != "fp8_block":
        return {}
    kind = quant_many.CONFIG["KERNEL"]
    return {k: quant_many.CONFIG[k] for k in ("KERNEL", *KEYS[kind])}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="125m,1b")
    p.add_argument("--sweep", action="store_true", help="time the one launch's configs")
    p.add_argument("--fmt", default="fp8_block", help=f"comma-separated of {sorted(VIEWS)}")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    print(common.env_header())
    rows = [r for m in args.models.split(",") for f in args.fmt.split(",")
            for r in run(m, device, args.sweep, f)]
    print(common.fmt_table(rows, ["model", "fmt", "variant", "weights", "params_M", "ms", "GB/s",
                                  "%copy"]))
    common.json_line({"bench": "many", "argv": sys.argv[1:], "rows": rows})


if __name__ == "__main__":
    main()
