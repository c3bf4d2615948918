"""Tile sweep of the Triton grouped GEMM (``kernels/gemm_grouped.py``) at the moe-1b model's
expert GEMMs, against bf16 ``torch._grouped_mm`` (what the bf16 model runs) in the same process.

    python benchmarks/bench_grouped_sweep.py                  # moe-1b shapes, every config
    python benchmarks/bench_grouped_sweep.py --configs 0,2    # some of the configs
    python benchmarks/bench_grouped_sweep.py --shapes issue --kinds triton_fp8,triton_fp8_tma \
        --configs default,0,1                                 # issue 18's layers, TMA or not
    python benchmarks/bench_grouped_sweep.py --quant          # the grouped NVFP4 quantizer's tiles
    python benchmarks/bench_grouped_sweep.py --pairs          # NVFP4 pairs: old vs register layout

moe-1b (``train/moe.py``): 16 experts of 768 (SwiGLU: gate and up fused, 1536 rows), d 1024,
top 2 of 8 × 2048 tokens = 32768 routed rows with uneven group sizes (a fixed draw). Per
expert layer and step, fprop and dgrad are "tokens" GEMMs (rows grouped by expert) and wgrad
is a "reduce" GEMM over the padded column layout (each group padded to 128 tokens: the FP8
1×128 wgrad block). FP8 operands are E4M3 codes with fp32 1×128 scales (activations,
gradients) and 128×128 scales (weights), as the fp8_blockwise recipe makes them; bf16 rows
time the kernel on bf16 operands (the MX/NVFP4 recipes' partial values). Each case is
graph-replayed (no launch overhead) and reported as TF/s and as a ratio to bf16
``torch._grouped_mm`` of the same problem ("reduce": the 2-D × 2-D form, groups along K).
Prints a table and ends with one JSON line. Not a test: needs a CUDA device.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

from microscale.kernels.gemm_grouped import CONFIG, grouped_gemm  # noqa: E402
from microscale.ops_grouped import grouped_mm_compat  # noqa: E402

E, TOKENS, D, I = 16, 32768, 1024, 768
# (name, mode, rows or M, N per expert, K): fprop gate_up / down, dgrad down / gate_up, wgrad
SHAPES = [("fprop_gate_up", "tokens", TOKENS, 2 * I, D),
          ("fprop_down", "tokens", TOKENS, D, I),
          ("dgrad_down", "tokens", TOKENS, I, D),
          ("dgrad_gate_up", "tokens", TOKENS, D, 2 * I),
          ("wgrad_gate_up", "reduce", 2 * I, D, None),
          ("wgrad_down", "reduce", D, I, None)]
# ``--shapes issue``: issue 18's layers (bench_moe.py: experts, tokens per expert, K -> N;
# balanced routing), each as its three GEMMs
ISSUE = {"dsv3_up": (8, 4096, 7168, 4096), "dsv3_down": (8, 4096, 2048, 7168),
         "qwen3_up": (16, 1024, 2048, 1536), "qwen3_down": (16, 1024, 768, 2048)}


def issue_shapes() -> list[tuple]:
    """(name, mode, rows or M, N, K, experts, tokens per expert) of every GEMM of ISSUE."""
    out = []
    for name, (e, per, k, n) in ISSUE.items():
        out += [(f"{name}_fprop", "tokens", e * per, n, k, e, per),
                (f"{name}_dgrad", "tokens", e * per, k, n, e, per),
                (f"{name}_wgrad", "reduce", n, k, None, e, per)]
    return out
CONFIGS = [dict(BM=128, BN=128, num_warps=8, num_stages=4),       # the FP8 default
           dict(BM=128, BN=128, num_warps=8, num_stages=3),
           dict(BM=128, BN=256, num_warps=8, num_stages=3),
           dict(BM=64, BN=128, num_warps=4, num_stages=4),
           dict(BM=128, BN=64, num_warps=4, num_stages=4),
           dict(BM=256, BN=128, num_warps=8, num_stages=3)]


def _counts(dev, e=E, per=None) -> torch.Tensor:
    """A fixed uneven routing: per-expert token counts summing to TOKENS (none a multiple of
    128); with ``per``, ``e`` experts of ``per`` tokens each (balanced)."""
    if per is not None:
        return torch.full((e,), per, dtype=torch.long, device=dev)
    g = torch.Generator().manual_seed(0)
    w = torch.rand(E, generator=g) + 0.5
    c = (w / w.sum() * TOKENS).floor().long()
    c[-1] += TOKENS - int(c.sum())
    return c.to(dev)


def _fp8(shape, dev):
    return (torch.randn(shape, device=dev) * 40).clamp(-448, 448).to(torch.float8_e4m3fn)


def _problem(mode, rows, n, k, dev, e=E, per=None):
    """Operands and offsets for one case: FP8 (codes, scales) and bf16 twins."""
    counts = _counts(dev, e, per)
    tokens = int(counts.sum())
    if mode == "tokens":
        offs = counts.cumsum(0).to(torch.int32)
        a8, b8 = _fp8((tokens, k), dev), _fp8((e * n, k), dev)
        sa = torch.rand(tokens, k // 128, device=dev) + 0.5
        sb = torch.rand(e * n // 128, k // 128, device=dev) + 0.5
        flops = 2.0 * tokens * n * k
        return dict(a8=a8, b8=b8, sa=sa, sb=sb, br_b=128, offs=offs, flops=flops, e=e,
                    a16=a8.to(torch.bfloat16), b16=b8.to(torch.bfloat16))
    pad = (counts + 127) // 128 * 128
    offs = pad.cumsum(0).to(torch.int32)
    kb = (tokens + e * 127 + 127) // 128 * 128
    a8, b8 = _fp8((rows, kb), dev), _fp8((n, kb), dev)
    sa = torch.rand(rows, kb // 128, device=dev) + 0.5
    sb = torch.rand(n, kb // 128, device=dev) + 0.5
    return dict(a8=a8, b8=b8, sa=sa, sb=sb, br_b=1, offs=offs, flops=2.0 * rows * n * tokens,
                e=e, a16=a8.to(torch.bfloat16), b16=b8.to(torch.bfloat16))


def _torch_bf16(mode, p):
    if mode == "tokens":
        b = p["b16"].reshape(p["e"], -1, p["b16"].shape[1]).transpose(1, 2)
        return lambda: grouped_mm_compat(p["a16"], b, p["offs"])
    return lambda: grouped_mm_compat(p["a16"], p["b16"].t(), p["offs"])


def _case(name, mode, p, kind, cfg):
    if kind == "torch_bf16":
        fn = _torch_bf16(mode, p)
    elif kind in ("triton_fp8", "triton_fp8_tma"):      # cfg {}: the module's default tile
        over = {**cfg, "BK": 128} if cfg else {}
        over["TMA"] = kind.endswith("_tma")
        fn = lambda: grouped_gemm(p["a8"], p["b8"], p["offs"], mode, sa=p["sa"], sb=p["sb"],  # noqa: E731
                                  br_b=p["br_b"], config=over, k_align=128)
    else:
        fn = lambda: grouped_gemm(p["a16"], p["b16"], p["offs"], mode,  # noqa: E731
                                  config={**cfg, "BK": 64}, k_align=128)
    try:
        ms = common.graph_ms(fn) or common.bench_ms(fn)
    except Exception as err:             # a config the compiler refuses (e.g. out of smem)
        return {"shape": name, "kind": kind, "config": cfg, "error": str(err)[:80]}
    return {"shape": name, "kind": kind, "config": cfg, "ms": ms, "tflops": p["flops"] / ms / 1e9}


# the grouped NVFP4 quantizer (kernels/quant_nvfp4_grouped.py: amax pass + quantize pass)
QUANT_CONFIGS = [dict(BR=64, BC=64, num_warps=4, PROGS_PER_SM=8),      # the default
                 dict(BR=32, BC=32, num_warps=4, PROGS_PER_SM=16),
                 dict(BR=32, BC=64, num_warps=4, PROGS_PER_SM=16),
                 dict(BR=64, BC=32, num_warps=4, PROGS_PER_SM=16),
                 dict(BR=64, BC=64, num_warps=8, PROGS_PER_SM=4),
                 dict(BR=128, BC=32, num_warps=4, PROGS_PER_SM=8)]


# bytes moved per element of a view: x read twice (amax pass, quantize pass), its SR byte
# read, a 4-bit code and 1/16 of an E4M3 scale written ("gbs" is bytes moved per second)
BYTES_PER_ELEMENT = 2 * 2 + 1 + 0.5 + 1 / 16


def quant_sweep(dev) -> list[dict]:
    """The grouped NVFP4 views of moe-1b's x [32768, 1024] as the layer asks for them: the row
    view with SR (bytes given) and the padded column view with RHT + SR, per tile config."""
    from microscale.kernels import quant_nvfp4_grouped as qg
    from microscale.quant.grouped import group_layout
    counts = _counts(dev)
    lay = group_layout(counts.cumsum(0).to(torch.int32), TOKENS, 16)
    x = torch.randn(TOKENS, D, device=dev).to(torch.bfloat16)
    x_pad = lay.pad(x)
    cases = {"row_sr": (x, lay.row_groups(), False, False),
             "col_rht_sr": (x_pad, lay.col_groups(), True, True)}
    default, rows = dict(qg.CONFIG), []
    for name, (src, seg, col, rht) in cases.items():
        bits = torch.randint(0, 256, (src.numel(),), dtype=torch.uint8, device=dev)
        for cfg in QUANT_CONFIGS:
            qg.CONFIG.update(cfg)
            fn = lambda: qg.quantize_nvfp4_segments_triton(src, seg, E, col, rht, bits)  # noqa: E731
            try:
                ms = common.graph_ms(fn) or common.bench_ms(fn)
                rows.append({"shape": name, "kind": "nvfp4_grouped_quant", "config": cfg,
                             "ms": ms, "gbs": BYTES_PER_ELEMENT * src.numel() / ms / 1e6})
            except Exception as err:
                rows.append({"shape": name, "kind": "nvfp4_grouped_quant", "config": cfg,
                             "error": str(err)[:80]})
        qg.CONFIG.clear()
        qg.CONFIG.update(default)
    return rows


# the NVFP4 pairs moe-1b's expert layers ask for (x: row RNE + column RHT; dy: row SR + column
# RHT + SR), through the sync-free op, older per-view kernels against the register-layout ones
# (kernels/quant_nvfp4_grouped_reg.py) and a few of the latter's tiles
PAIRS = [("x_1024", D, False), ("h_768", I, False), ("dy_1536", 2 * I, True),
         ("dy_1024", D, True)]
REG_CONFIGS = [{}, dict(NI=8), dict(BC=32), dict(PROGS_PER_SM=4), dict(NI=8, PROGS_PER_SM=4),
               dict(AMAX_BC=64, AMAX_PROGS_PER_SM=2)]


def quant_pairs(dev) -> list[dict]:
    """Graph-replayed ms of ``quantize_grouped_fast`` per pair and path; "gbs": the floor's
    bytes (x read once, both views' codes and scales written) per second."""
    from microscale.kernels import grouped as fast
    from microscale.kernels import quant_nvfp4_grouped_reg as qgr
    from microscale.recipe import Recipe
    recipe, counts = Recipe.from_name("nvfp4"), _counts(dev)
    offs = counts.cumsum(0).to(torch.int32)
    seeds = torch.randint(0, 2**31 - 1, (E,), device=dev)
    rows, saved = [], (dict(fast.CONFIG), dict(qgr.CONFIG))
    for name, k, dy in PAIRS:
        ops = (recipe.dgrad.a, recipe.wgrad.a) if dy else (recipe.fprop.a, recipe.wgrad.b)
        views = [(op.format, op.quantize_kwargs() | {"check_finite": False}) for op in ops]
        x = torch.randn(TOKENS, k, device=dev).to(torch.bfloat16)
        floor = x.numel() * (2 + 2 * (0.5 + 1 / 16))
        for kind, cfg in [("old", None)] + [("reg", c) for c in REG_CONFIGS]:
            fast.CONFIG["NVFP4_REG"] = cfg is not None
            qgr.CONFIG.update(cfg or {})
            fn = lambda: fast.quantize_grouped_fast(x, offs, *views, 16, seeds, None,  # noqa: E731
                                                    None, None, None, "triton")
            ms = common.graph_ms(fn) or common.bench_ms(fn)
            rows.append({"shape": name, "kind": kind, "config": cfg or {}, "ms": ms,
                         "gbs": floor / ms / 1e6})
            fast.CONFIG.update(saved[0])
            qgr.CONFIG.update(saved[1])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", default=None,
                    help="comma list of indices into CONFIGS, or 'default' (the module's tile)")
    ap.add_argument("--kinds", default="triton_fp8,triton_bf16",
                    help="triton_fp8 (pointer loads), triton_fp8_tma, triton_bf16")
    ap.add_argument("--shapes", default="moe-1b", choices=("moe-1b", "issue"),
                    help="moe-1b's expert GEMMs, or issue 18's DeepSeek-V3 / Qwen3 layers")
    ap.add_argument("--quant", action="store_true",
                    help="only the grouped NVFP4 quantizer's tile sweep (QUANT_CONFIGS)")
    ap.add_argument("--pairs", action="store_true",
                    help="only the NVFP4 pairs through the sync-free op, old vs register "
                         "layout (PAIRS, REG_CONFIGS), and the copy rate")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_grouped_sweep needs a CUDA device")
    dev = torch.device("cuda")
    print(common.env_header())
    print(f"# defaults: {CONFIG}")
    picks = [{} if i == "default" else CONFIGS[int(i)] for i in args.configs.split(",")] \
        if args.configs else CONFIGS
    rows = []
    if args.pairs:
        print(f"# copy rate: {common.copy_bandwidth_gbs(dev):.0f} GB/s")
    shapes = [(*s, E, None) for s in SHAPES] if args.shapes == "moe-1b" else issue_shapes()
    for name, mode, r, n, k, e, per in ([] if args.quant or args.pairs else shapes):
        p = _problem(mode, r, n, k, dev, e, per)
        base = _case(name, mode, p, "torch_bf16", {})
        rows.append(base)
        for kind in args.kinds.split(","):
            for cfg in picks:
                row = _case(name, mode, p, kind, cfg)
                if "ms" in row and "ms" in base:
                    row["vs_bf16"] = base["ms"] / row["ms"]
                print(f"# {name} {kind} {cfg or 'default'}: {row.get('tflops', 0):.0f} TF/s "
                      f"{row.get('vs_bf16', 0):.3f}x {row.get('error', '')}", flush=True)
                rows.append(row)
        del p
        torch.cuda.empty_cache()
    if args.quant:
        rows = quant_sweep(dev)
    if args.pairs:
        rows = quant_pairs(dev)
    for r in rows:
        r["config"] = ",".join(f"{k}={v}" for k, v in r["config"].items()) or "-"
    print(common.fmt_table(rows, ["shape", "kind", "config", "ms", "tflops", "gbs", "vs_bf16",
                                  "error"]))
    common.json_line({"bench": "grouped_sweep", "env": common.env_info(), "rows": rows})


if __name__ == "__main__":
    main()
