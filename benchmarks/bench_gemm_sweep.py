"""Per-shape GEMM path sweep at the small training shapes; writes a suggested path table.

    python benchmarks/bench_gemm_sweep.py                   # 50m + 125m shapes, T = 8192, 16384
    python benchmarks/bench_gemm_sweep.py --quick           # T = 16384 only
    python benchmarks/bench_gemm_sweep.py --families fp8 --shapes 16384x640x128   # given shapes
    python benchmarks/bench_gemm_sweep.py --mxfp8-configs   # MXFP8 tile configs at big shapes
    python benchmarks/bench_gemm_sweep.py --device cpu --tiny   # smoke test (TRITON_INTERPRET=1)

Shapes: every GEMM of every linear layer of the ``--models`` (default 50m and 125m; the
zoo's q, k, v, o, up and down projections, read off ``MODEL_CONFIGS``) at T tokens: fprop
``[T, in]·[out, in]ᵀ``, dgrad ``[T, out]·[in, out]ᵀ``, wgrad ``[out, T]·[in, T]ᵀ`` (M, N, K = T, out, in / T, in, out /
out, in, T). For each shape it times bf16 cuBLAS and every path of every family that
``kernels/gemm_paths.py`` chooses between (operands pre-quantized; the GEMM alone):

* fp8:   ``torch`` (cuBLASLt blockwise), ``triton`` (three tiles, and three with K split over
  programs: ``split_k``); and, to see whether the
  operand order matters to cuBLASLt, ``torch_swap``: ``(B Aᵀ)ᵀ`` (a transposed view) and
  ``torch_swapc`` (made contiguous), and ``torch_fast`` (cuBLASLt's fast accumulation), not
  paths of the table
* fp8t:  FP8 tensorwise through ``torch._scaled_mm`` (what ``fp8_tensorwise`` runs), for reference
* fp4:   NVFP4 ``dequant`` (dequantize + cuBLAS), ``mainloop``
* mxfp8: ``fp8`` (FP8 tensor cores, three configs), ``dequant``

Prints one table per shape, then the best path per family and shape, writes the suggested
rules (``--out``; the format of ``gemm_paths.RULES``: one exact-shape rule wherever the best
path beats the family default by more than ``--margin``) and ends with one JSON line. Use the
file with ``MICROSCALE_GEMM_TABLE=<file>``, or paste it into ``gemm_paths.RULES``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import microscale as ms


def bench_ms(fn, device) -> float:
    """Median ms of ``fn`` replayed from a CUDA graph, as a training step runs it (a wrapper's
    host time would otherwise decide the small shapes: session 8 measured the NVFP4 GEMM at
    16384x768x768 as 0.51 ms eager for 0.06 ms of kernels); eager where capture fails."""
    import common
    t = common.graph_ms(fn)
    return t if t is not None else common.bench_ms(fn, warmup_ms=10, rep_ms=40)

def linear_dims(models: list[str]) -> list[tuple[int, int]]:
    """(in, out) of every distinct block linear of the zoo ``models`` (q, k, v, o, up, down)."""
    import common
    return list(dict.fromkeys((i, o) for _, _, i, o in common.zoo_linears(models)))


def training_shapes(tokens: list[int], models: list[str]) -> list[tuple[int, int, int]]:
    """(M, N, K) of fprop, dgrad and wgrad for every linear of the models, deduplicated."""
    shapes = []
    for fan_in, fan_out in linear_dims(models):
        for t in tokens:
            shapes += [(t, fan_out, fan_in), (t, fan_in, fan_out), (fan_out, fan_in, t)]
    return list(dict.fromkeys(shapes))


def _operands(family, a_hp, b_hp, wgrad):
    ref = {"backend": "reference"}
    if family == "fp8":
        blk = (1, 128) if wgrad else (128, 128)
        return (ms.quantize(a_hp, "fp8_block", block=(1, 128), **ref),
                ms.quantize(b_hp, "fp8_block", block=blk, **ref))
    if family == "fp8t":
        return ms.quantize(a_hp, "fp8_tensor", **ref), ms.quantize(b_hp, "fp8_tensor", **ref)
    if family == "fp4":
        return ms.quantize(a_hp, "nvfp4", **ref), ms.quantize(b_hp, "nvfp4", block_2d=not wgrad,
                                                               **ref)
    return ms.quantize(a_hp, "mxfp8_e4m3", **ref), ms.quantize(b_hp, "mxfp8_e4m3", **ref)


def candidates():
    """family -> [(name, path, config, callable(qa, qb))]."""
    from microscale.kernels import gemm_block, gemm_fp8, gemm_mxfp8
    bf16 = torch.bfloat16
    fp8_tiles = [{}, {"bm": 64, "bn": 128, "num_warps": 4, "num_stages": 4},
                 {"bm": 128, "bn": 64, "num_warps": 4, "num_stages": 4},
                 # K split over programs (session 50): weight gradients with few output tiles
                 {"bm": 128, "bn": 64, "num_warps": 4, "num_stages": 4, "split_k": 4},
                 {"bm": 128, "bn": 64, "num_warps": 4, "num_stages": 4, "split_k": 8},
                 {"bm": 128, "bn": 128, "num_warps": 8, "num_stages": 3, "split_k": 11}]
    mx_cfgs = [gemm_mxfp8.DEFAULT_CONFIG, gemm_mxfp8.SWEEP_CONFIGS[6], gemm_mxfp8.SWEEP_CONFIGS[7]]
    out = {"fp8": [("torch", "torch", {}, lambda qa, qb: gemm_fp8.scaled_mm_fp8(
        qa, qb, bf16, path="torch"))]}
    out["fp8"] += [("torch_swap", "torch_swap", {}, lambda qa, qb: gemm_fp8.scaled_mm_fp8(
        qb, qa, bf16, path="torch").t()), ("torch_swapc", "torch_swapc", {},
        lambda qa, qb: gemm_fp8.scaled_mm_fp8(qb, qa, bf16, path="torch").t().contiguous())]
    out["fp8"].append(("torch_fast", "torch_fast", {}, lambda qa, qb: _fast_accum(
        gemm_fp8.scaled_mm_fp8, qa, qb, bf16, path="torch")))
    out["fp8t"] = [("torch", "torch", {}, lambda qa, qb: gemm_fp8.scaled_mm_fp8(
        qa, qb, bf16, path="torch"))]
    out["fp8"] += [(f"triton{i}", "triton", t, lambda qa, qb, t=t: gemm_fp8.scaled_mm_fp8(
        qa, qb, bf16, path="triton", **t)) for i, t in enumerate(fp8_tiles)]
    # fp4 as ms.Linear runs it (nn/function.py _gemm): fp32 out, the factor left to the caller
    out["fp4"] = [(p, p, {}, lambda qa, qb, p=p: gemm_block.scaled_mm_block(
        qa, qb, torch.float32, apply_factor=False, path=p)) for p in ("dequant", "mainloop")]
    out["mxfp8"] = [(f"fp8_{i}", "fp8", _diff(c, gemm_mxfp8.MXFP8Config()),
                     lambda qa, qb, c=c: gemm_mxfp8.scaled_mm_mxfp8_fp8(qa, qb, bf16, c))
                    for i, c in enumerate(mx_cfgs)]
    out["mxfp8"].append(("dequant", "dequant", {}, lambda qa, qb: gemm_block.scaled_mm_block(
        qa, qb, bf16, path="dequant")))
    return out


def _fast_accum(fn, *args, **kwargs):
    """``fn`` with cuBLASLt's FP8 fast accumulation asked for (``gemm_fp8.USE_FAST_ACCUM``;
    not what training runs: a variant to time)."""
    from microscale.kernels import gemm_fp8
    old, gemm_fp8.USE_FAST_ACCUM = gemm_fp8.USE_FAST_ACCUM, True
    try:
        return fn(*args, **kwargs)
    finally:
        gemm_fp8.USE_FAST_ACCUM = old


def _diff(cfg, base) -> dict:
    return {k: v for k, v in asdict(cfg).items() if asdict(base)[k] != v}


def _once_ms(fn, device=None) -> float:
    """One timed call (the CPU smoke test: the interpreter is far too slow to repeat)."""
    import time
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def run_shape(m, n, k, device, cands, widths=()):
    g = torch.Generator(device=device).manual_seed(m + n + k)
    a_hp = torch.randn(m, k, device=device, generator=g, dtype=torch.bfloat16)
    b_hp = torch.randn(n, k, device=device, generator=g, dtype=torch.bfloat16)
    timer = bench_ms if device.type == "cuda" else _once_ms
    t_bf16 = timer(lambda: a_hp @ b_hp.t(), device)
    rows = [{"family": "bf16", "variant": "bf16", "ms": t_bf16, "ratio": 1.0}]
    wgrad = m in set(widths) and k >= 8192        # [out, T]·[in, T]ᵀ: both along tokens
    for family, variants in cands.items():
        qa, qb = _operands(family, a_hp, b_hp, wgrad)
        for name, path, config, fn in variants:
            row = {"family": family, "variant": name, "path": path, "config": config}
            try:
                fn(qa, qb)
                t = timer(lambda fn=fn, qa=qa, qb=qb: fn(qa, qb), device)
                row.update(ms=t, ratio=t_bf16 / t)
            except Exception as err:  # noqa: BLE001 -- a row reports its failure and goes on
                row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:100]}"
            rows.append(row)
    return rows


def suggest(results: dict, margin: float) -> list[dict]:
    """Exact-shape rules wherever a family's best path beats its default by > margin."""
    from microscale.kernels.gemm_paths import FAMILIES, choose_path
    rules = []
    for shape, rows in results.items():
        m, n, k = (int(v) for v in shape.split("x"))
        for family in ("fp8", "fp4", "mxfp8"):
            timed = [r for r in rows if r["family"] == family and "ms" in r
                     and r["path"] in FAMILIES[family]]
            if not timed:
                continue
            best = min(timed, key=lambda r: r["ms"])
            default, _, _ = choose_path(family, m, n, k)
            t_default = min((r["ms"] for r in timed if r["path"] == default and not r["config"]),
                            default=float("inf"))
            if best["ms"] * (1 + margin) < t_default:
                rules.append({"family": family, "m": [m, m], "n": [n, n], "k": [k, k],
                              "path": best["path"], "config": best["config"] or None,
                              "speedup_vs_default": round(t_default / best["ms"], 3)
                              if t_default < float("inf") else None})
    return rules


def mxfp8_configs(device, shapes):
    """Every MXFP8 sweep config, the regroup pass alone, and the share of one-chain K steps."""
    from microscale.kernels import gemm_mxfp8
    timer = bench_ms if device.type == "cuda" else _once_ms
    out = []
    for m, n, k in shapes:
        g = torch.Generator(device=device).manual_seed(7)
        a = torch.randn(m, k, device=device, generator=g, dtype=torch.bfloat16)
        b = torch.randn(n, k, device=device, generator=g, dtype=torch.bfloat16)
        qa, qb = (ms.quantize(t, "mxfp8_e4m3", backend="reference") for t in (a, b))
        t_bf16 = timer(lambda a=a, b=b: a @ b.t(), device)
        t_rg = timer(lambda qa=qa: gemm_mxfp8.regroup_mx(qa), device)
        cheap = _cheap_share(gemm_mxfp8.regroup_mx(qa), gemm_mxfp8.regroup_mx(qb))
        print(f"\nM={m} N={n} K={k}: bf16 {t_bf16:.3f} ms; regroup pass (A) {t_rg:.3f} ms; "
              f"one-chain K steps after regroup (64x128 tiles) {cheap:.1%}")
        for cfg in gemm_mxfp8.SWEEP_CONFIGS:
            row = {"shape": f"{m}x{n}x{k}", "config": str(cfg), "bf16_ms": t_bf16,
                   "regroup_ms": t_rg, "cheap_share": cheap}
            try:
                t = timer(lambda c=cfg, qa=qa, qb=qb: gemm_mxfp8.scaled_mm_mxfp8_fp8(
                    qa, qb, torch.bfloat16, c), device)
                row.update(ms=t, ratio=t_bf16 / t, tflops=2 * m * n * k / t / 1e9)
                print(f"  {cfg!s:<40}{t:>9.3f} ms{t_bf16 / t:>7.2f}x bf16{row['tflops']:>8.0f} TF/s")
            except Exception as err:  # noqa: BLE001
                row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:100]}"
                print(f"  {cfg!s:<40}  error: {row['error']}")
            out.append(row)
    return out


def _cheap_share(qa, qb, bm=64, bn=128, ch=4) -> float:
    """Share of (tile pair, K step) with one exponent per row in both tiles."""
    def uniform(q, rows):
        e = q.scale.int()
        e = e[: e.shape[0] // rows * rows, : e.shape[1] // ch * ch].reshape(-1, rows, e.shape[1] // ch, ch)
        return (e.amax(-1) == e.amin(-1)).all(1).float()           # [row tiles, K steps]
    ua, ub = uniform(qa, bm), uniform(qb, bn)
    return (ua.mean(0) * ub.mean(0)).mean().item()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="T = 16384 only")
    p.add_argument("--tiny", action="store_true", help="one small shape (smoke test)")
    p.add_argument("--models", default="50m,125m", help="zoo sizes whose linears to sweep")
    p.add_argument("--families", default="fp8,fp4,mxfp8", help="path families to time")
    p.add_argument("--shapes", default=None, help="instead of the models' shapes: MxNxK,...")
    p.add_argument("--mxfp8-configs", action="store_true",
                   help="instead: every MXFP8 tile config at 8192^3 and a LLaMA-7B shape")
    p.add_argument("--out", default="gemm_table_suggested.json", help="suggested rules (JSON)")
    p.add_argument("--margin", type=float, default=0.03, help="min gain over the default")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    if device.type != "cuda" and not args.tiny:
        print("bench_gemm_sweep needs a CUDA GPU; use --device cpu --tiny (TRITON_INTERPRET=1).")
        return 0
    try:
        import common
        print(common.env_header())
    except ImportError:
        print(f"torch {torch.__version__}")
    if args.mxfp8_configs:
        shapes = [(64, 128, 256)] if args.tiny else [(8192, 8192, 8192), (16384, 4096, 4096)]
        rows = mxfp8_configs(device, shapes)
        print(json.dumps({"bench": "gemm_mxfp8_configs", "rows": rows}))
        return 0
    models = args.models.split(",")
    shapes = [(64, 128, 256)] if args.tiny else training_shapes(
        [16384] if args.quick else [8192, 16384], models)
    if args.shapes:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    widths = {w for dims in linear_dims(models) for w in dims}
    cands, results = {f: v for f, v in candidates().items()
                      if f in args.families.split(",")}, {}
    for m, n, k in shapes:
        rows = run_shape(m, n, k, device, cands, widths)
        results[f"{m}x{n}x{k}"] = rows
        print(f"\nM={m} N={n} K={k}   (bf16 {rows[0]['ms']:.3f} ms)")
        for r in rows[1:]:
            val = r.get("error") or f"{r['ms']:8.3f} ms {r['ratio']:6.2f}x bf16"
            print(f"  {r['family']:<6}{r['variant']:<12}{val}")
    rules = suggest(results, args.margin)
    Path(args.out).write_text(json.dumps(rules, indent=1))
    print(f"\n{len(rules)} suggested rules -> {args.out}")
    for r in rules:
        print(f"  {r['family']:<6} M={r['m'][0]} N={r['n'][0]} K={r['k'][0]}: {r['path']} "
              f"{r['config'] or ''} (vs the default: {r['speedup_vs_default'] or 'it failed'}x)")
    print(json.dumps({"bench": "gemm_sweep", "results": results, "rules": rules}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
