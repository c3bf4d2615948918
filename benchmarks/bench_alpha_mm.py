"""NVFP4's output GEMM: cuBLAS with an fp32 output (α applied by the consumer) against the Triton
GEMM that applies α in its epilogue and writes bf16 (``kernels/gemm_alpha.py``), at the fprop
and dgrad shapes of the 125m and 1b models (T = 16 × 1024 and 8 × 2048 tokens).

    python benchmarks/bench_alpha_mm.py                 # both models, every tile config
    python benchmarks/bench_alpha_mm.py --models 125m --configs 0,1
    python benchmarks/bench_alpha_mm.py --models 125m,125m-kv --configs 0,8,9,10,11,12,13

Columns (µs, graph-replayed, so no launch overhead): ``bf16`` cuBLAS bf16 → bf16 (what a bf16
layer pays), ``fp32`` cuBLAS bf16 → fp32 (the old NVFP4 path's GEMM), ``fp32+`` that plus the
extra bytes its consumer reads (2 more per output element, at the measured copy rate), and one
column per Triton config; ``best`` names the fastest Triton config and ``gain`` = fp32+ / best
(> 1: the epilogue kernel wins). Checks every config against ``round(α · fp32 mm)`` (the bits
may differ only by summation order). Prints a table and ends with one JSON line. Needs CUDA.

``--wgrad``: the weight-gradient GEMMs instead (an fp32 output, [out, in] = dyᵀ · x over
T = 16384 tokens, the 125m / 350m / 1b projections and the 4096 -> 14336 layer): ``fp32`` cuBLAS
bf16 -> fp32, ``fp32·α`` that then the α pass a compiled step runs after it (a memory-speed
kernel reading and writing 4 bytes an element: ``gemm_alpha._scale_inplace``), ``alpha`` the
Triton GEMM writing α · the sum in fp32 itself (its default tile), ``tiles`` its 128x256 output
tiles (``gemm_paths.EPILOGUE["fp32_min_tiles"]`` is the rule), ``gain`` = fp32·α / alpha.

``--training``: issue 12 item 5's NVFP4 half. Every fprop, dgrad and wgrad GEMM of the
``--models`` (zoo sizes, T = ``--tokens``, 16384 by default) on the path ``ms.Linear`` takes
there, its operands in bf16 ``value · block_scale`` form (as the quantizers write x and dy;
wgrad's saved xᵀ is decoded to it by a dequantize pass of its own, not timed here):
``gemm_alpha`` with α and the output in its epilogue, or (an fp32 weight gradient under
``fp32_min_tiles`` output tiles) cuBLAS's fp32 sum then the α pass; ``bf16`` is what a bf16
layer pays for the same GEMM (cuBLAS, bf16 in and out), ``x_bf16`` = bf16 / path.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

from microscale.kernels.gemm_alpha import alpha_mm  # noqa: E402

# (model, name, M, N, K): y [M, N] = A [M, K] · B [N, K]ᵀ; fprop then dgrad per linear
SHAPES = {
    "125m": [("qkv", 16384, 2304, 768), ("o", 16384, 768, 768), ("up", 16384, 3072, 768),
             ("down", 16384, 768, 3072), ("dgrad_qkv", 16384, 768, 2304),
             ("dgrad_up", 16384, 768, 3072), ("dgrad_down", 16384, 3072, 768)],
    # the zoo's separate projections (q and o are "o"'s shape, fprop and dgrad)
    "125m-kv": [("kv", 16384, 256, 768), ("dgrad_kv", 16384, 768, 256)],
    "1b-kv": [("kv", 16384, 512, 2048), ("dgrad_kv", 16384, 2048, 512)],
    # 50m's 640-wide outputs (N = 640: 2.5 of the default's 256-wide tiles), 8192 and 16384
    # tokens: its up dgrad and down fprop (K 2560) ran 0.69x bf16 at 8192 (session 58); and
    # its 128-wide k/v fprop (half of one such tile)
    "50m-640": [("down", 8192, 640, 2560), ("o", 8192, 640, 640), ("down", 16384, 640, 2560),
                ("o", 16384, 640, 640)],
    "50m-128": [("kv", 8192, 128, 640), ("kv", 16384, 128, 640)],
    "1b": [("qkv", 16384, 6144, 2048), ("o", 16384, 2048, 2048), ("up", 16384, 8192, 2048),
           ("down", 16384, 2048, 8192), ("dgrad_qkv", 16384, 2048, 6144),
           ("dgrad_up", 16384, 2048, 8192), ("dgrad_down", 16384, 8192, 2048)],
}
# (model, name, M = out features, N = in features); K = T = 16384 tokens
WGRAD = [("125m", "q/o", 768, 768), ("125m", "k/v", 256, 768), ("125m", "up", 3072, 768),
         ("125m", "down", 768, 3072), ("350m", "q/o", 1024, 1024), ("350m", "up", 4096, 1024),
         ("350m", "down", 1024, 4096), ("1b", "q/o", 2048, 2048), ("1b", "k/v", 512, 2048),
         ("1b", "up", 8192, 2048), ("1b", "down", 2048, 8192), ("layer", "4096->14336", 14336, 4096)]
CONFIGS = [dict(TMA=True, BM=128, BN=256, BK=64, NUM_STAGES=3, num_warps=8),
           dict(TMA=True, BM=128, BN=128, BK=64, NUM_STAGES=4, num_warps=8),
           dict(TMA=True, BM=128, BN=128, BK=64, NUM_STAGES=4, num_warps=4),
           dict(TMA=True, BM=256, BN=128, BK=64, NUM_STAGES=3, num_warps=8),
           dict(TMA=True, BM=128, BN=256, BK=64, NUM_STAGES=4, num_warps=8),
           dict(TMA=True, BM=64, BN=256, BK=64, NUM_STAGES=4, num_warps=4),
           dict(TMA=False, BM=128, BN=256, BK=64, NUM_STAGES=3, num_warps=8),
           dict(TMA=False, BM=128, BN=128, BK=64, NUM_STAGES=4, num_warps=8),
           # session 26: the TMA kernel's loop not flattened, warp-specialized, its epilogue
           # stored in two halves (so 4 stages fit at 128x256)
           dict(TMA=True, BM=128, BN=256, BK=64, NUM_STAGES=3, num_warps=8, FLATTEN=False),
           dict(TMA=True, BM=128, BN=256, BK=64, NUM_STAGES=3, num_warps=8, FLATTEN=False,
                WS=True),
           dict(TMA=True, BM=128, BN=256, BK=64, NUM_STAGES=3, num_warps=8, SUBTILE=True),
           dict(TMA=True, BM=128, BN=256, BK=64, NUM_STAGES=4, num_warps=8, SUBTILE=True),
           dict(TMA=True, BM=128, BN=128, BK=64, NUM_STAGES=4, num_warps=4, FLATTEN=False,
                WS=True),
           dict(TMA=True, BM=128, BN=128, BK=128, NUM_STAGES=3, num_warps=8, SUBTILE=True)]


def _label(i: int, c: dict) -> str:
    extra = "".join(f"-{k.lower()}" for k in ("WS", "SUBTILE") if c.get(k)) \
        + ("-noflat" if c.get("FLATTEN") is False else "")
    return f"c{i}:{'tma' if c['TMA'] else 'ptr'}{c['BM']}x{c['BN']}s{c['NUM_STAGES']}" \
        f"w{c['num_warps']}{'' if c.get('BK', 64) == 64 else 'k' + str(c['BK'])}{extra}"


def _operands(m, n, k, dev):
    """bf16 ``a [m, k]``, ``b [n, k]`` (Gaussian, seeded) and a device factor ``f``."""
    g = torch.Generator(device=dev).manual_seed(0)
    a = torch.randn(m, k, device=dev, generator=g).bfloat16()
    b = torch.randn(n, k, device=dev, generator=g).bfloat16()
    return a, b, torch.tensor([0.3711], device=dev)


def _row(model, name, m, n, k, configs, dev, copy_gbs) -> dict:
    a, b, f = _operands(m, n, k, dev)
    ref = (torch.mm(a, b.t(), out_dtype=torch.float32) * f).bfloat16()
    row = {"model": model, "gemm": name, "shape": f"{m}x{n}x{k}",
           "bf16": common.graph_ms(lambda: torch.mm(a, b.t())) * 1e3,
           "fp32": common.graph_ms(lambda: torch.mm(a, b.t(), out_dtype=torch.float32)) * 1e3}
    row["fp32+"] = row["fp32"] + 2 * m * n * 2 / (copy_gbs * 1e3)
    best = None
    for i, c in configs:
        try:
            y = alpha_mm(a, b, f, torch.bfloat16, **c)
            bad = ((y.float() - ref.float()).abs() > ref.float().abs() * 2 ** -7 + 1e-3).sum()
            us = common.graph_ms(lambda c=c: alpha_mm(a, b, f, torch.bfloat16, **c)) * 1e3
            row[_label(i, c)] = round(us, 1) if int(bad) == 0 else f"WRONG({int(bad)})"
            if int(bad) == 0 and (best is None or us < best[1]):
                best = (_label(i, c), us)
        except Exception as err:                      # a config the device cannot run
            row[_label(i, c)] = f"fail:{type(err).__name__}"
    if best:
        row["best"], row["gain"] = best[0], row["fp32+"] / best[1]
        row["x_bf16"] = row["bf16"] / best[1]
    return row


def _wgrad_row(model, name, m, n, k, dev) -> dict:
    from microscale.kernels.gemm_alpha import _scale_inplace
    from microscale.kernels.gemm_paths import output_tiles
    a, b, f = _operands(m, n, k, dev)
    ref = torch.mm(a, b.t(), out_dtype=torch.float32) * f
    y = alpha_mm(a, b, f, torch.float32)
    bad = int(((y - ref).abs() > ref.abs() * 2 ** -16 + 1e-2).sum())
    row = {"model": model, "gemm": name, "shape": f"{m}x{n}x{k}",
           "tiles": output_tiles(m, n),
           "fp32": common.graph_ms(lambda: torch.mm(a, b.t(), out_dtype=torch.float32)) * 1e3,
           "fp32·α": common.graph_ms(lambda: _scale_inplace(
               torch.mm(a, b.t(), out_dtype=torch.float32), f)) * 1e3}
    us = common.graph_ms(lambda: alpha_mm(a, b, f, torch.float32)) * 1e3
    row["alpha"] = round(us, 1) if bad == 0 else f"WRONG({bad})"
    row["gain"] = row["fp32·α"] / us if bad == 0 else None
    return row


def training_shapes(models: list[str], tokens: int = 16384) -> list[tuple]:
    """(model, gemm, M, N, K, out dtype) of every distinct block GEMM of the zoo ``models``:
    fprop ``[T, in]·[out, in]ᵀ`` and dgrad ``[T, out]·[in, out]ᵀ`` into bf16, wgrad
    ``[out, T]·[in, T]ᵀ`` into fp32 (q, k, v, o, up and down projections)."""
    shapes = []
    for model, lin, i, o in common.zoo_linears(models):
        shapes += [(model, f"{lin} fprop", tokens, o, i, torch.bfloat16),
                   (model, f"{lin} dgrad", tokens, i, o, torch.bfloat16),
                   (model, f"{lin} wgrad", o, i, tokens, torch.float32)]
    return shapes


def _training_row(model, name, m, n, k, out_dtype, dev) -> dict:
    from microscale.kernels.gemm_alpha import _scale_inplace
    from microscale.kernels.gemm_paths import alpha_epilogue, takes_expanded
    a, b, f = _operands(m, n, k, dev)
    row = {"model": model, "gemm": name, "shape": f"{m}x{n}x{k}",
           "bf16": common.graph_ms(lambda: torch.mm(a, b.t())) * 1e3}
    if not takes_expanded("nvfp4", "nvfp4", m, n, k, dev):
        row["path"] = "codes (not timed here)"
        return row
    if alpha_epilogue(out_dtype, dev, m, n):
        row["path"] = "alpha_mm"
        fn = lambda: alpha_mm(a, b, f, out_dtype)              # noqa: E731
    else:
        row["path"] = "cuBLAS fp32 + α pass"
        fn = lambda: _scale_inplace(torch.mm(a, b.t(), out_dtype=torch.float32), f)  # noqa: E731
    ref = torch.mm(a, b.t(), out_dtype=torch.float32) * f
    bad = int(((fn().float() - ref).abs() > ref.abs() * 2 ** -7 + 1e-2).sum())
    us = common.graph_ms(fn) * 1e3
    row["nvfp4"] = round(us, 1) if bad == 0 else f"WRONG({bad})"
    row["x_bf16"] = row["bf16"] / us if bad == 0 else None
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="125m,1b")
    ap.add_argument("--configs", default=None, help="comma-separated config indices")
    ap.add_argument("--wgrad", action="store_true",
                    help="the fp32-output weight-gradient GEMMs (module docstring)")
    ap.add_argument("--training", action="store_true",
                    help="every GEMM of --models on the path training takes (docstring)")
    ap.add_argument("--tokens", type=int, default=16384, help="T of --training's GEMMs")
    args = ap.parse_args()
    dev = torch.device("cuda")
    if args.training:
        print(common.env_header())
        rows = [_training_row(*shape, dev=dev)
                for shape in training_shapes(args.models.split(","), args.tokens)]
        print(common.fmt_table(rows, ["model", "gemm", "shape", "path", "bf16", "nvfp4",
                                      "x_bf16"]))
        ratios = [r["x_bf16"] for r in rows if r.get("x_bf16")]
        print(f"{len(ratios)} of {len(rows)} timed; x_bf16 min {min(ratios):.3f}, "
              f"max {max(ratios):.3f}" if ratios else "none timed")
        common.json_line({"bench": "alpha_mm_training", "rows": rows})
        return
    if args.wgrad:
        print(common.env_header())
        rows = [_wgrad_row(*shape, k=16384, dev=dev) for shape in WGRAD]
        print(common.fmt_table(rows, ["model", "gemm", "shape", "tiles", "fp32", "fp32·α",
                                      "alpha", "gain"]))
        common.json_line({"bench": "alpha_mm_wgrad", "rows": rows})
        return
    idx = range(len(CONFIGS)) if args.configs is None else [int(i) for i in args.configs.split(",")]
    configs = [(i, CONFIGS[i]) for i in idx]
    copy_gbs = common.copy_bandwidth_gbs(dev)
    print(common.env_header(), f"| copy rate {copy_gbs:.0f} GB/s")
    rows = [_row(model, *shape, configs=configs, dev=dev, copy_gbs=copy_gbs)
            for model in args.models.split(",") for shape in SHAPES[model]]
    cols = ["model", "gemm", "shape", "bf16", "fp32", "fp32+"] + [_label(i, c) for i, c in configs] \
        + ["best", "gain", "x_bf16"]
    print(common.fmt_table(rows, cols))
    common.json_line({"bench": "alpha_mm", "copy_gbs": copy_gbs, "rows": rows})


if __name__ == "__main__":
    main()
