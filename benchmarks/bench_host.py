"""Host (CPU) time per call of microscale's ops and of a quantized layer: the launch overhead.

A training step that is not replayed as one CUDA graph (FSDP2, DDP, Hugging Face models,
``--compile`` without ``--cuda-graph``) pays the host time of every op it launches. With tiny
operands the GPU finishes each kernel long before the host issues the next, so the wall time
of a long loop without synchronisation is the host time per call. Rows:

* ``torch.add`` and one bare Triton kernel launch: the floor;
* ``quantize_rowcol`` / ``scaled_mm`` through the custom op (what a layer calls) and through
  the backend registry directly (the kernel's own Python: planning, allocation, launches);
* ``ms.Linear`` forward + backward, eager and under ``torch.compile(fullgraph=True)``.

Then a cProfile of the compiled layer (top functions by own time).

    python benchmarks/bench_host.py [--recipes nvfp4,fp8_blockwise] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import time

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

import microscale as ms  # noqa: E402
from microscale.backend import dispatch  # noqa: E402
from microscale.ops import mm, quantize_views, rowcol_key, rowcol_reference  # noqa: E402
from microscale.recipe import Recipe  # noqa: E402


def host_us(fn, calls: int = 300, warmup: int = 20) -> float:
    """Mean wall µs per call over ``calls`` calls without synchronising in between."""
    for _ in range(warmup):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - t0) / calls * 1e6


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def layer_fns(recipe: str, device, n: int):
    torch.manual_seed(0)
    layer = ms.Linear(n, n, recipe=recipe).to(device)
    x = torch.randn(n, n, device=device, dtype=torch.bfloat16, requires_grad=True)
    compiled = torch.compile(layer, fullgraph=True)

    def run(f):
        def step():
            with torch.autocast(device.type, dtype=torch.bfloat16):
                f(x).sum().backward()
        return step
    return layer, run(layer), run(compiled)


def op_rows(recipe_name: str, device, n: int) -> list[dict]:
    recipe = Recipe.from_name(recipe_name)
    x = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    row = (recipe.fprop.a.format, recipe.fprop.a.quantize_kwargs() | {"check_finite": False})
    col = (recipe.wgrad.b.format, recipe.wgrad.b.quantize_kwargs() | {"check_finite": False})
    seed = torch.zeros(2, dtype=torch.int64, device=device)
    if row[0] and recipe.wgrad.b.rounding.value == "stochastic":
        col[1]["seed"] = seed
    backend = recipe.backend
    key = rowcol_key(row[0].value, col[0].value)
    q_row, q_col = quantize_views(x, row, col, backend)
    rows = [
        {"what": f"{recipe_name} quantize_rowcol (custom op)",
         "us": host_us(lambda: quantize_views(x, row, col, backend))},
        {"what": f"{recipe_name} quantize_rowcol (registry, no op)",
         "us": host_us(lambda: dispatch("quantize_rowcol", key, backend, device, rowcol_reference,
                                        x, row, col))},
        {"what": f"{recipe_name} scaled_mm (custom op)",
         "us": host_us(lambda: mm(q_row, q_row, torch.bfloat16, backend))},
    ]
    return rows


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipes", default="nvfp4,fp8_blockwise,mxfp8,fp8_tensorwise")
    p.add_argument("--n", type=int, default=256, help="operand size (n x n, tiny on purpose)")
    p.add_argument("--profile", action="store_true",
                   help="cProfile the compiled layer, and torch.profiler's CPU time per op")
    args = p.parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    a = torch.randn(args.n, args.n, device=device)
    rows = [{"what": "torch.add", "us": host_us(lambda: torch.add(a, a))}]
    if device.type == "cuda":
        from microscale.kernels.quant_fp8_tensor import _amax_kernel
        amax = torch.zeros((), device=device)
        rows.append({"what": "bare Triton launch (amax kernel)", "us": host_us(
            lambda: _amax_kernel[(1,)](a, amax, a.numel(), BLOCK=1024, NUM_STAGES=1))})
    profiles = {}
    for recipe in args.recipes.split(","):
        rows += op_rows(recipe, device, args.n)
        layer, eager, compiled = layer_fns(recipe, device, args.n)
        rows.append({"what": f"{recipe} ms.Linear fwd+bwd eager", "us": host_us(eager, 100)})
        rows.append({"what": f"{recipe} ms.Linear fwd+bwd compiled", "us": host_us(compiled, 100)})
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(50):
                compiled()
            sync()
            prof.disable()
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
            profiles[recipe] = buf.getvalue()
            print(f"--- cProfile, {recipe} compiled layer fwd+bwd x50 (tottime)")
            print("\n".join(buf.getvalue().splitlines()[:45]))
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CPU]) as tprof:
                for _ in range(20):
                    compiled()
                sync()
            print(f"--- torch.profiler, {recipe} compiled layer fwd+bwd x20 (self CPU)")
            print(tprof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18,
                                             max_name_column_width=60))
    print(f"{'what':<52} {'host us/call':>12}")
    for r in rows:
        print(f"{r['what']:<52} {r['us']:>12.1f}")
    result = {"env": common.env_info(), "bench": "host", "n": args.n, "rows": rows}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
