"""GEMM throughput of every microscale format against bf16 cuBLAS, on one GPU.

    python benchmarks/bench_gemm.py                    # 8192^3 + LLaMA-7B/70B layer shapes
    python benchmarks/bench_gemm.py --quick            # 8192^3 only
    python benchmarks/bench_gemm.py --sweep            # also tile configs of the Triton kernels

For each shape ``y[M, N] = A[M, K] · B[N, K]ᵀ`` (M = tokens, N = out features, K = in
features) it times, with the operands already quantized (the GEMM alone):

* ``bf16``            torch.mm on bf16 (cuBLAS), the baseline of the same run
* ``nvfp4/mainloop``  Triton kernel decoding packed E2M1 + E4M3 scales in the main loop
* ``nvfp4/dequant``   Triton dequantize pass to bf16 + cuBLAS bf16 GEMM
* ``nvfp4/auto``      whichever ``gemm_fp4.fp4_strategy`` picks for the shape
* ``mxfp4/*``, ``mxfp8/*``  the same two strategies for the MX formats
* ``mxfp8_e4m3/fp8``  MXFP8 on FP8 tensor cores (``kernels/gemm_mxfp8.py``, default config:
  regroup pass + one-chain K steps where the scales agree); ``/fp8_noregroup`` without the
  regroup pass, ``/fp8_perchunk`` the exact per-32 path only (no regroup, no one-chain steps)
* ``fp8_block/torch`` F.scaled_mm BlockWise1x128 x BlockWise128x128 (cuBLASLt), if present
* ``fp8_block/triton`` the Triton FP8 blockwise kernel
* ``fp8_tensor/torch`` torch._scaled_mm tensorwise;  ``fp8_tensor/triton`` the Triton kernel

TFLOP/s = 2·M·N·K / median time. Prints one table per shape and ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import microscale as ms  # noqa: E402

try:
    import common  # noqa: E402  (benchmarks/common.py: timing, env header, JSON line)
except ImportError:
    common = None

SHAPES_7B = [(16384, 4096, 4096), (16384, 11008, 4096), (16384, 4096, 11008)]
SHAPES_70B = [(16384, 8192, 8192), (16384, 28672, 8192), (16384, 8192, 28672)]
SQUARE = [(8192, 8192, 8192)]
TARGETS = {"nvfp4": 0.85, "fp8_block": 1.6, "mxfp8_e4m3": 1.4}   # ratio to bf16 at 8192^3


def bench_ms(fn, device: torch.device) -> float:
    """Median milliseconds of ``fn()``: benchmarks/common.py's timer if present, else do_bench."""
    if common is not None and hasattr(common, "bench_ms"):
        return common.bench_ms(fn)
    if device.type == "cuda":
        import triton.testing
        return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
    import time
    fn()
    t0 = time.perf_counter()
    for _ in range(3):
        fn()
    return (time.perf_counter() - t0) / 3 * 1e3


def _quantized_pair(fmt, a_hp, b_hp):
    """The operands as a linear layer's fprop sees them (reference quantizers: exact, untimed)."""
    ref = {"backend": "reference"}
    if fmt == "nvfp4":
        return ms.quantize(a_hp, "nvfp4", **ref), ms.quantize(b_hp, "nvfp4", block_2d=True, **ref)
    if fmt == "fp8_block":
        return (ms.quantize(a_hp, "fp8_block", block=(1, 128), **ref),
                ms.quantize(b_hp, "fp8_block", block=(128, 128), **ref))
    return ms.quantize(a_hp, fmt, **ref), ms.quantize(b_hp, fmt, **ref)


def variants(gemm_fp4, gemm_fp8):
    """name -> (format, callable(qa, qb) -> y)."""
    from dataclasses import replace

    from microscale.kernels import gemm_mxfp8
    bf16 = torch.bfloat16
    v = {}
    for name, change in (("fp8", {}), ("fp8_noregroup", {"regroup": False}),
                         ("fp8_perchunk", {"adaptive": False, "regroup": False})):
        v[f"mxfp8_e4m3/{name}"] = ("mxfp8_e4m3", lambda qa, qb, ch=change: (
            gemm_mxfp8.scaled_mm_mxfp8_fp8(qa, qb, bf16, replace(
                gemm_mxfp8.config_for(qa.rows, qb.rows, qa.cols), **ch))))
    for fmt, fn in (("nvfp4", gemm_fp4.scaled_mm_fp4), ("mxfp4", gemm_fp4.scaled_mm_fp4),
                    ("mxfp8_e4m3", gemm_fp4.scaled_mm_mxfp8)):
        for strategy in ("mainloop", "dequant", "auto"):
            v[f"{fmt}/{strategy}"] = (fmt, lambda qa, qb, fn=fn, s=strategy: fn(
                qa, qb, out_dtype=bf16, strategy=s))
    for fmt in ("fp8_block", "fp8_tensor"):
        for path in ("torch", "triton"):
            v[f"{fmt}/{path}"] = (fmt, lambda qa, qb, p=path: gemm_fp8.scaled_mm_fp8(
                qa, qb, out_dtype=bf16, path=p))
    return v


def run_shape(m, n, k, device, names, gemm_fp4, gemm_fp8, check=True):
    g = torch.Generator(device=device).manual_seed(0)
    a_hp = torch.randn(m, k, device=device, generator=g, dtype=torch.bfloat16)
    b_hp = torch.randn(n, k, device=device, generator=g, dtype=torch.bfloat16)
    flop = 2.0 * m * n * k
    rows = []
    t_bf16 = bench_ms(lambda: a_hp @ b_hp.t(), device)
    rows.append({"variant": "bf16", "ms": t_bf16, "tflops": flop / t_bf16 / 1e9, "ratio": 1.0})
    table = variants(gemm_fp4, gemm_fp8)
    cache = {}
    for name in names:
        if name == "bf16":           # the baseline row above is always there
            continue
        fmt, fn = table[name]
        if fmt not in cache:
            cache.clear()            # keep one format's operands alive at a time
            cache[fmt] = _quantized_pair(fmt, a_hp, b_hp)
        qa, qb = cache[fmt]
        row = {"variant": name}
        try:
            y = fn(qa, qb)
            if check:
                row["rel_err"] = _rel_err(y, qa, qb)
            t = bench_ms(lambda: fn(qa, qb), device)
            row.update(ms=t, tflops=flop / t / 1e9, ratio=t_bf16 / t)
        except Exception as err:  # noqa: BLE001 -- a benchmark row reports any failure and goes on
            row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:120]}"
        rows.append(row)
    return rows


def _rel_err(y, qa, qb) -> float:
    """Relative Frobenius error against the fp32 reference on a 512-row slice (cheap)."""
    from microscale.gemm import scaled_mm_reference
    from dataclasses import replace
    rows = min(512, qa.rows)
    qa_s = replace(qa, data=qa.data[:rows], scale=qa.scale[: max(1, rows // qa.block[0])]
                   if qa.scale.dim() == 2 else qa.scale, shape=torch.Size((rows, qa.cols)))
    ref = scaled_mm_reference(qa_s, qb)
    return ((y[:rows].float() - ref).norm() / ref.norm()).item()


def sweep(device, gemm_fp4, gemm_fp8, m=8192, n=8192, k=8192):
    """Tuning data: Triton tile configs, the dequantize pass alone, small-M, raw cuBLAS FP8."""
    g = torch.Generator(device=device).manual_seed(1)
    a_hp = torch.randn(m, k, device=device, generator=g, dtype=torch.bfloat16)
    b_hp = torch.randn(n, k, device=device, generator=g, dtype=torch.bfloat16)
    flop, bf16 = 2.0 * m * n * k, torch.bfloat16
    out = []
    configs = [dict(bm=128, bn=128, bkb=64, num_warps=8, num_stages=3),
               dict(bm=128, bn=256, bkb=64, num_warps=8, num_stages=3),
               dict(bm=128, bn=256, bkb=32, num_warps=8, num_stages=4),
               dict(bm=128, bn=128, bkb=32, num_warps=4, num_stages=4),
               dict(bm=64, bn=128, bkb=64, num_warps=4, num_stages=3)]
    for fmt in ("nvfp4", "mxfp4"):
        qa, qb = _quantized_pair(fmt, a_hp, b_hp)
        for cfg in configs:
            out.append(_sweep_row(f"{fmt}/mainloop", cfg, flop, device, lambda c=cfg: (
                gemm_fp4.scaled_mm_fp4(qa, qb, bf16, strategy="mainloop", **c))))
        for cfg in [dict(block_rows=r, block_bytes=b, permute_k=p, num_warps=w)
                    for r, b, w in ((16, 128, 4), (32, 128, 4), (8, 256, 4), (32, 256, 8),
                                    (64, 64, 4)) for p in (True, False)]:
            row = _sweep_row(f"{fmt}/dequant_pass", cfg, 0, device, lambda c=cfg: (
                gemm_fp4.dequantize_bf16(qa, **c)))
            row["gbs"] = qa.nbytes() + 2 * qa.rows * qa.cols
            row["gbs"] = row["gbs"] / row["ms"] / 1e6 if "ms" in row else None
            out.append(row)
        qa = qb = None                  # freed before the next pair
    qa, qb = _quantized_pair("mxfp8_e4m3", a_hp, b_hp)
    out.append(_sweep_row("mxfp8/dequant_pass", {}, 0, device,
                          lambda: gemm_fp4.dequantize_bf16(qa)))
    qa = qb = None
    out += _small_m(device, gemm_fp4, n, k)
    out += _fp8_raw(device, gemm_fp8, a_hp, b_hp, flop)
    return out


def _small_m(device, gemm_fp4, n, k):
    """Where the mainloop kernel beats dequantize + cuBLAS: few tokens against a big weight."""
    rows = []
    g = torch.Generator(device=device).manual_seed(2)
    b_hp = torch.randn(n, k, device=device, generator=g, dtype=torch.bfloat16)
    qb = ms.quantize(b_hp, "nvfp4", block_2d=True, backend="reference")
    for m in ((64, 256) if n < 1024 else (64, 256, 1024, 2048, 4096)):
        qa = ms.quantize(torch.randn(m, k, device=device, generator=g, dtype=torch.bfloat16),
                         "nvfp4", backend="reference")
        flop = 2.0 * m * n * k
        for strategy, cfg in (("mainloop", dict(bm=64, bn=128, num_warps=4)),
                              ("mainloop", {}), ("dequant", {})):
            rows.append(_sweep_row(f"nvfp4/{strategy}/M={m}", cfg, flop, device,
                                   lambda s=strategy, c=cfg: gemm_fp4.scaled_mm_fp4(
                                       qa, qb, torch.bfloat16, strategy=s, **c)))
        a_bf = torch.randn(m, k, device=device, dtype=torch.bfloat16)
        rows.append(_sweep_row(f"bf16/M={m}", {}, flop, device, lambda a=a_bf: a @ b_hp.t()))
    return rows


def _fp8_raw(device, gemm_fp8, a_hp, b_hp, flop):
    """F.scaled_mm with its arguments prebuilt (no scale relayout), fast accumulation on/off."""
    qa, qb = _quantized_pair("fp8_block", a_hp, b_hp)
    rows = []
    try:
        gemm_fp8.scaled_mm_fp8(qa, qb, torch.bfloat16, path="torch")
        plan = next(p for key, p in gemm_fp8._PLAN.items() if key[0] == (1, 128))
    except Exception as err:  # noqa: BLE001 -- report and go on
        return [{"variant": "fp8_block/raw", "error": f"{type(err).__name__}: {err}"[:160]}]
    args = gemm_fp8.blockwise_call_args(qa, qb, plan)
    for fast in (False, True):
        rows.append(_sweep_row("fp8_block/raw", {"plan": str(plan), "fast_accum": fast}, flop,
                               device, lambda f=fast: torch.nn.functional.scaled_mm(
                                   *args, output_dtype=torch.bfloat16, use_fast_accum=f)))
    qt_a, qt_b = _quantized_pair("fp8_tensor", a_hp, b_hp)
    for fast in (False, True):
        rows.append(_sweep_row("fp8_tensor/raw", {"fast_accum": fast}, flop, device,
                               lambda f=fast: torch._scaled_mm(
                                   qt_a.data, qt_b.data.t(), qt_a.scale, qt_b.scale,
                                   out_dtype=torch.bfloat16, use_fast_accum=f)))
    return rows


def _sweep_row(name, cfg, flop, device, fn):
    row = {"variant": name, **cfg}
    try:
        t = bench_ms(fn, device)
        row.update(ms=t, tflops=flop / t / 1e9 if flop else None)
    except Exception as err:  # noqa: BLE001 -- e.g. out of shared memory for a config
        row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:100]}"
    return row


def print_table(title, rows):
    print(f"\n{title}")
    print(f"{'variant':<22}{'ms':>9}{'TFLOP/s':>10}{'x bf16':>8}{'rel err':>10}")
    for r in rows:
        if "error" in r:
            print(f"{r['variant']:<22}  error: {r['error']}")
            continue
        err = f"{r['rel_err']:.1e}" if "rel_err" in r else ""
        print(f"{r['variant']:<22}{r['ms']:>9.3f}{r['tflops']:>10.1f}{r.get('ratio', 0):>8.2f}"
              f"{err:>10}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="8192^3 only (same as --shapes square)")
    p.add_argument("--shapes", choices=("all", "square", "llama"), default="all")
    p.add_argument("--sweep", action="store_true",
                   help="also tuning data: tile configs, dequant pass, small M, raw FP8")
    p.add_argument("--variants", default="", help="comma-separated subset of variant names")
    p.add_argument("--no-check", action="store_true", help="skip the accuracy column")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tiny", action="store_true",
                   help="one 256x384x512 shape (smoke test; on CPU set TRITON_INTERPRET=1)")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    if device.type != "cuda" and not args.tiny:
        print("bench_gemm needs a CUDA GPU for real shapes; use --device cpu --tiny to smoke-test.")
        return 0
    from microscale.kernels import gemm_fp4, gemm_fp8
    names = list(variants(gemm_fp4, gemm_fp8))
    if args.variants:
        names = [n for n in args.variants.split(",") if n]
    shapes = {"all": SQUARE + SHAPES_7B + SHAPES_70B, "square": SQUARE,
              "llama": SHAPES_7B + SHAPES_70B}["square" if args.quick else args.shapes]
    if args.tiny:
        shapes = [(256, 384, 512)]
    dev_name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    if common is not None and hasattr(common, "env_header"):
        print(common.env_header())
    else:
        print(f"torch {torch.__version__}, {dev_name}")
    result = {"bench": "gemm", "device": dev_name, "shapes": {}}
    for m, n, k in shapes:
        rows = run_shape(m, n, k, device, names, gemm_fp4, gemm_fp8, check=not args.no_check)
        print_table(f"M={m} N={n} K={k}", rows)
        result["shapes"][f"{m}x{n}x{k}"] = rows
    if args.sweep:
        rows = sweep(device, gemm_fp4, gemm_fp8, *((256, 256, 512) if args.tiny else ()))
        print("\nTile sweep at 8192^3")
        for r in rows:
            print(json.dumps(r))
        result["sweep"] = rows
    sq = {r["variant"]: r for r in result["shapes"].get("8192x8192x8192", [])}
    result["targets"] = {f: {"target": t, "best": max(
        (r.get("ratio", 0) for v, r in sq.items() if v.startswith(f + "/")), default=0)}
        for f, t in TARGETS.items()}
    line = json.dumps(result)
    if common is not None and hasattr(common, "json_line"):
        common.json_line(result)
    else:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
