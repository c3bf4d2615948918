"""Quantized MoE grouped GEMMs (``ms.grouped_mm``) against bf16 ``torch._grouped_mm``, and one MoE
training step (the zoo's ``moe-1b``) against compiled bf16.

    python benchmarks/bench_moe.py                         # every shape, recipe, + moe-1b step
    python benchmarks/bench_moe.py --shapes dsv3_up --recipes fp8_blockwise,nvfp4 --no-train
    python benchmarks/bench_moe.py --smoke                 # tiny shapes on CPU (CI)
    python benchmarks/bench_moe.py --no-train --recipes fp8_blockwise --profile fp8_blockwise

Shapes (experts × tokens per expert, K → N; balanced routing, offs on the device)::

    dsv3_up     8 × 4096,  7168 → 4096     DeepSeek-V3 gate_up (hidden 7168, 2·2048)
    dsv3_down   8 × 4096,  2048 → 7168     DeepSeek-V3 down
    qwen3_up   16 × 1024,  2048 → 1536     Qwen3-MoE gate_up (hidden 2048, 2·768)
    qwen3_down 16 × 1024,   768 → 2048     Qwen3-MoE down

Per shape, all in one process with the same inputs (x bf16 ``[T, K]``, fp32 master weights
``[E, N, K]``, dy bf16):

* ``bf16``: forward + backward as three ``torch._grouped_mm`` calls (fprop ``x Wᵀ``, dgrad
  ``dy W``, wgrad ``dyᵀ x`` grouped along tokens) on bf16 weights: the baseline every ratio is
  against (``fwd+bwd`` and ``fwd`` columns);
* ``fp8_rowwise_core``: ``torch._scaled_grouped_mm`` forward with E4M3 operands quantized
  beforehand (rowwise scales; GEMM only, no quantization): the core FP8 peer;
* each ``--recipes`` entry: ``ms.grouped_mm`` forward + backward with everything the recipe
  does (per-expert quantization of x, W and dy in both layouts, RHT, SR) and forward alone.

TFLOP/s count ``2·T·K·N`` per GEMM (3 GEMMs for fwd+bwd). Targets (fwd+bwd vs bf16, issue 18):
FP8 blockwise ≥ 1.3× at DeepSeek-V3 shapes and ≥ 1.2× at Qwen3 shapes, NVFP4 ≥ 0.85×,
MXFP8 ≥ 1.0×. The training step times ``moe-1b`` (``benchmarks/bench_train.py``'s harness:
compiled blocks, fused AdamW, bf16 autocast) for bf16 and ``--train-recipes``, which may name
``torchao_moe_rowwise``: torchao's FP8 rowwise MoE training path as the peer (its differentiable
FP8 rowwise grouped GEMM for the experts, its float8 rowwise training for the dense linears;
``pip install -e ".[bench]"``). Also
prints ``ms.explain()``: which path every grouped op took. Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

import microscale as ms  # noqa: E402

SHAPES = {"dsv3_up": (8, 4096, 7168, 4096), "dsv3_down": (8, 4096, 2048, 7168),
          "qwen3_up": (16, 1024, 2048, 1536), "qwen3_down": (16, 1024, 768, 2048)}
SMOKE = {"tiny": (4, 40, 128, 128)}
RECIPES = ("fp8_blockwise", "nvfp4", "mxfp8", "mxfp4", "fp8_tensorwise")
TARGETS = {"dsv3": {"fp8_blockwise": 1.3, "nvfp4": 0.85, "mxfp8": 1.0},
           "qwen3": {"fp8_blockwise": 1.2, "nvfp4": 0.85, "mxfp8": 1.0}}


def inputs(shape, device):
    E, per, K, N = shape
    g = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(E * per, K, device=device, generator=g).to(torch.bfloat16)
    w = torch.randn(E, N, K, device=device, generator=g) * K ** -0.5
    dy = torch.randn(E * per, N, device=device, generator=g).to(torch.bfloat16)
    offs = torch.arange(1, E + 1, device=device, dtype=torch.int32) * per
    return x, w, dy, offs


def bf16_steps(x, w, dy, offs):
    from microscale.ops_grouped import grouped_mm_compat as gmm
    w16 = w.to(torch.bfloat16)

    def fwd():
        return gmm(x, w16.transpose(1, 2), offs)

    def fwd_bwd():
        fwd()
        gmm(dy, w16, offs)                       # dgrad: dy [T, N] · W_e [N, K]
        gmm(dy.t(), x, offs)                     # wgrad: [E, N, K], groups along tokens
    return fwd, fwd_bwd


def fp8_rowwise_core(x, w, offs):
    """``torch._scaled_grouped_mm`` forward on pre-quantized E4M3 rowwise operands."""
    f8, top = torch.float8_e4m3fn, 448.0
    sa = x.float().abs().amax(dim=1).clamp(min=1e-12) / top            # [T]
    sb = w.abs().amax(dim=2).clamp(min=1e-12) / top                     # [E, N]
    a8 = (x.float() / sa[:, None]).to(f8)
    b8 = (w / sb[:, :, None]).to(f8).transpose(1, 2)                    # [E, K, N] col-major
    return lambda: torch._scaled_grouped_mm(a8, b8, sa, sb, offs=offs, out_dtype=torch.bfloat16)


def ours(x, w, dy, offs, recipe):
    wp = w.clone().requires_grad_()
    xg = x.clone().requires_grad_()

    def fwd():
        with torch.no_grad():
            return ms.grouped_mm(x, wp, offs, recipe)

    def fwd_bwd():
        ms.grouped_mm(xg, wp, offs, recipe).backward(dy)
        wp.grad = xg.grad = None
    return fwd, fwd_bwd


def gemm_only(x, w, offs):
    """The Triton grouped GEMM alone (forward, operands prepared beforehand): FP8 codes with
    1×128 / 128×128 block scales, and bf16. What the quantizers around it cost is the rest."""
    from microscale.kernels.gemm_grouped import grouped_gemm
    E, N, K = w.shape
    w16 = w.to(torch.bfloat16).reshape(E * N, K)
    a8, b8 = x.to(torch.float8_e4m3fn), w16.to(torch.float8_e4m3fn)
    sa = torch.ones(x.shape[0], K // 128, device=x.device)
    sb = torch.ones(E * N // 128, K // 128, device=x.device)
    return {"triton_grouped_fp8_gemm": lambda: grouped_gemm(a8, b8, offs, "tokens", sa=sa, sb=sb,
                                                            br_b=128),
            "triton_grouped_bf16_gemm": lambda: grouped_gemm(x, w16, offs, "tokens")}


def bench_shape(name, shape, recipes, device, graph: bool = False) -> list[dict]:
    E, per, K, N = shape
    x, w, dy, offs = inputs(shape, device)
    flop = 2.0 * E * per * K * N
    rows = []

    def add(variant, fwd, fwd_bwd):
        row = {"shape": name, "experts": E, "tokens": E * per, "K": K, "N": N,
               "variant": variant}
        for key, fn, n_gemm in (("fwd", fwd, 1), ("fwd_bwd", fwd_bwd, 3)):
            if fn is None:
                continue
            try:
                t = common.bench_ms(fn)
                row[f"{key}_ms"], row[f"{key}_tflops"] = t, n_gemm * flop / t / 1e9
                g = common.graph_ms(fn) if graph else None
                if g:                         # replayed from a CUDA graph: no host time
                    row[f"{key}_graph_ms"] = g
            except Exception as err:          # report, keep going (a peer may be missing)
                row[f"{key}_error"] = f"{type(err).__name__}: {str(err)[:120]}"
        rows.append(row)

    add("bf16", *bf16_steps(x, w, dy, offs))
    if device.type == "cuda" and hasattr(torch, "_scaled_grouped_mm"):
        add("fp8_rowwise_core", fp8_rowwise_core(x, w, offs), None)
    if device.type == "cuda" and K % 128 == 0 and N % 128 == 0:
        for variant, fn in gemm_only(x, w, offs).items():
            add(variant, fn, None)
    for recipe in recipes:
        add(recipe, *ours(x, w, dy, offs, recipe))
    base = rows[0]
    for r in rows:
        for key in ("fwd", "fwd_bwd", "fwd_graph", "fwd_bwd_graph"):
            if f"{key}_ms" in r and f"{key}_ms" in base:
                r[f"{key}_vs_bf16"] = base[f"{key}_ms"] / r[f"{key}_ms"]
        target = TARGETS.get(name.split("_")[0], {}).get(r["variant"])
        if target is not None and "fwd_bwd_vs_bf16" in r:
            r["target"], r["meets"] = target, r["fwd_bwd_vs_bf16"] >= target
            if "fwd_bwd_graph_vs_bf16" in r:
                r["meets_graph"] = r["fwd_bwd_graph_vs_bf16"] >= target
    del x, w, dy
    return rows


def profile_shape(name, shape, recipe, device) -> dict:
    """Device ms per kernel (name, calls) of one ``ms.grouped_mm`` forward + backward of
    ``recipe`` at ``shape`` (after warm-up), largest first: where the op's time goes."""
    from torch.profiler import ProfilerActivity, profile
    x, w, dy, offs = inputs(shape, device)
    _, fwd_bwd = ours(x, w, dy, offs, recipe)
    for _ in range(3):
        fwd_bwd()
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fwd_bwd()
        torch.cuda.synchronize(device)
    kernels: dict[str, list] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and not e.name.startswith("## "):
            k = kernels.setdefault(e.name[:60], [0.0, 0])
            k[0] += e.device_time / 1e3
            k[1] += 1
    top = sorted(kernels.items(), key=lambda t: -t[1][0])
    return {"shape": name, "recipe": recipe, "busy_ms": round(sum(v[0] for _, v in top), 3),
            "kernels": {n: [round(v[0], 3), v[1]] for n, v in top[:16]}}


def train_rows(recipes, args, device) -> list[dict]:
    import bench_train
    ns = argparse.Namespace(batch=args.batch, seq=args.seq, mode="default", warmup=args.warmup,
                            steps=args.steps)
    model = "moe-tiny" if args.smoke else "moe-1b"
    rows = []
    for recipe in ("bf16", *recipes):
        try:
            rows.append(bench_train.run_one(model, recipe, ns, device, args.compile,
                                            args.train_graph))
        except Exception as err:
            rows.append({"model": model, "recipe": recipe,
                         "error": f"{type(err).__name__}: {str(err)[:160]}"})
    base = rows[0].get("step_ms")
    for r in rows:
        if base and r.get("step_ms"):
            r["speed_vs_bf16"] = base / r["step_ms"]
    return rows


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default="all", help=f"comma list of {', '.join(SHAPES)} or all")
    p.add_argument("--recipes", default=",".join(RECIPES))
    p.add_argument("--steps", type=int, default=4, help="timed training steps (median)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--train-recipes", default="fp8_blockwise,nvfp4")
    p.add_argument("--no-train", action="store_true", help="skip the moe-1b training step")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--compile", default="blocks", choices=("blocks", "none"))
    p.add_argument("--smoke", action="store_true", help="tiny shapes, CPU-friendly (CI)")
    p.add_argument("--device", default=None)
    p.add_argument("--train-graph", default="none", choices=("none", "step"),
                   help="step: the moe-1b training step replayed from one CUDA graph")
    p.add_argument("--graph", action="store_true",
                   help="also time every variant replayed from a CUDA graph (no host time)")
    p.add_argument("--profile", default="",
                   help="comma list of recipes: per-kernel device ms of one fwd+bwd per shape")
    args = p.parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if args.smoke:
        shapes, args.batch, args.seq, args.steps, args.warmup = SMOKE, 1, 16, 1, 1
        args.compile = "none"
    else:
        names = list(SHAPES) if args.shapes == "all" else args.shapes.split(",")
        shapes = {n: SHAPES[n] for n in names}
    recipes = [r for r in args.recipes.split(",") if r]
    print(common.env_header())
    rows = []
    for name, shape in shapes.items():
        rows += bench_shape(name, shape, recipes, device, args.graph)
    print(common.fmt_table(rows, ["shape", "variant", "fwd_tflops", "fwd_vs_bf16",
                                  "fwd_bwd_tflops", "fwd_bwd_vs_bf16", "fwd_graph_vs_bf16",
                                  "fwd_bwd_graph_vs_bf16", "target", "meets", "meets_graph"]))
    for r in rows:
        for key in ("fwd_error", "fwd_bwd_error"):
            if key in r:
                print(f"  {r['shape']} {r['variant']}: {r[key]}")
    profiles = [profile_shape(n, shape, r, device) for n, shape in shapes.items()
                for r in args.profile.split(",") if r and device.type == "cuda"]
    for prof in profiles:
        print(f"# profile {prof['shape']} {prof['recipe']}: {prof['busy_ms']} ms busy")
        for kname, (t, calls) in prof["kernels"].items():
            print(f"#   {t:8.3f} ms  {calls:4d}x  {kname}")
    train = []
    if not args.no_train:
        train = train_rows([r for r in args.train_recipes.split(",") if r], args, device)
        print(common.fmt_table(train, ["model", "recipe", "batch", "step_ms", "tok_s",
                                       "speed_vs_bf16", "peak_gb", "compile_s", "error"]))
    print(ms.explain())
    result = {"bench": "moe", "gemm": rows, "train": train, "profiles": profiles}
    common.json_line(result)
    return result


if __name__ == "__main__":
    main()
