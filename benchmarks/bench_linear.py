"""A whole ``ms.Linear`` forward + backward per recipe, against ``nn.Linear`` in bf16.

    python benchmarks/bench_linear.py                          # tokens 16384, 4096 -> 14336
    python benchmarks/bench_linear.py --device cpu --tiny      # smoke test on a tiny shape

One step is ``y = layer(x); y.backward(dy)`` with x and dy in bf16: three GEMMs (fprop,
dgrad, wgrad) plus every quantization the recipe does (x both ways, W, dy both ways, RHT,
stochastic rounding). The baseline is ``nn.Linear(in, out, bias=False)`` with bf16 weights.

Saved-activation memory is what autograd keeps between forward and backward, counted by a
``saved_tensors_hooks`` pack hook (bytes of every tensor saved for backward, parameters
excluded; a quantized weight kept for dgrad is counted), next to the per-token part alone
(x's saved view, from ``nn.linear.saved_activation_bytes``).
Targets at 16384 x 4096 -> 14336 (issue 12): NVFP4 <= 1.1x the bf16 time, FP8 blockwise
<= 0.62x, FP8 tensorwise <= 0.7x. Prints a table and ends with one JSON line.

The peers, in the same process (``--recipes``; torchao installed, ``microscale[bench]``):
``torchao_blockwise`` (torchao's ``Float8BlockwiseLinear``, 1x128 activations and 128x128
weights through cuBLASLt, as fp8_blockwise), ``torchao_rowwise`` and ``torchao_tensorwise``
(``convert_to_float8_training``). A recipe or peer ending in ``@compile`` runs under
``torch.compile`` (torchao's float8 training layers are meant to be compiled; ours run eager).
A microscale recipe ending in ``@NAME`` for a kernel set of ``bench_train.KERNEL_SETS`` runs
with those kernel settings (an A/B in one process, e.g. ``nvfp4,nvfp4@alpha-off``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import microscale as ms  # noqa: E402

try:
    import common  # noqa: E402  (benchmarks/common.py: timing, env header, JSON line)
except ImportError:
    common = None

RECIPES = ("nvfp4", "mxfp4", "mxfp8", "fp8_blockwise", "fp8_tensorwise")
TORCHAO = ("torchao_blockwise", "torchao_blockwise@compile", "torchao_rowwise@compile",
           "torchao_tensorwise@compile")
# max time relative to bf16 nn.Linear (issue 12, items 3, 4, 6)
TARGETS = {"nvfp4": 1.1, "fp8_blockwise": 0.62, "fp8_tensorwise": 0.7}


def bench_ms(fn, device: torch.device, tiny: bool) -> float:
    """Median milliseconds: common.bench_ms if present, else do_bench (CUDA) or a wall clock."""
    if common is not None and hasattr(common, "bench_ms") and device.type == "cuda":
        return common.bench_ms(fn)
    if device.type == "cuda":
        import triton.testing
        return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
    fn()
    reps = 1 if tiny else 3
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps * 1e3


def _graph_ms(step, device: torch.device) -> float | None:
    """The step replayed from a CUDA graph (``common.graph_ms``): its kernels without the
    host's launch and dispatch time, as a graph-captured training step runs them. None off
    CUDA or where the step cannot be captured."""
    if device.type != "cuda" or common is None:
        return None
    try:
        return common.graph_ms(step)
    except Exception:  # noqa: BLE001 -- e.g. a compiled layer that refuses capture: no column
        return None


def saved_bytes(layer: nn.Module, x: torch.Tensor) -> int:
    """Bytes autograd saves for backward in one forward (parameters not counted)."""
    params = {p.data_ptr() for p in layer.parameters()}
    total = 0

    def pack(t):
        nonlocal total
        if t.data_ptr() not in params:
            total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        layer(x)
    return total


def _x_saved_formula(recipe: str, d_in: int, tokens: int) -> int:
    """What the layer's own accounting says x costs (``nn.linear.saved_activation_bytes``)."""
    if recipe == "bf16" or recipe.startswith("torchao_"):
        return 2 * d_in * tokens          # torchao keeps x in bf16 (an estimate for its rows)
    recipe = recipe.partition("@")[0]
    from microscale.nn.linear import saved_activation_bytes
    return saved_activation_bytes(recipe, d_in, tokens)


def _torchao_layer(name: str, bf16: nn.Linear) -> nn.Module:
    """torchao's training layer ``name`` (``torchao_blockwise``, ``torchao_rowwise``,
    ``torchao_tensorwise``) around the bf16 layer's weight."""
    if name == "torchao_blockwise":
        from torchao.prototype.blockwise_fp8_training.linear import Float8BlockwiseLinear
        return Float8BlockwiseLinear.from_float(bf16)
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    wrapped = nn.Sequential(bf16)
    cfg = Float8LinearConfig.from_recipe_name(name.split("_", 1)[1])
    convert_to_float8_training(wrapped, config=cfg)
    if type(wrapped[0]) is nn.Linear:
        raise RuntimeError(f"{name}: torchao left the layer unconverted")
    return wrapped[0]


def make_layer(recipe: str, d_in: int, d_out: int, device: torch.device) -> nn.Module:
    """The layer for a row: ``bf16`` (nn.Linear), a torchao peer, or ``ms.Linear``; a name
    ending in ``@compile`` is wrapped in ``torch.compile``."""
    name, _, option = recipe.partition("@")
    if option not in ("", "compile") and (name in ("bf16",) or name.startswith("torchao_")):
        raise ValueError(f"{recipe!r}: a bf16 or torchao row takes only '@compile'")
    if name == "bf16" or name.startswith("torchao_"):
        layer = nn.Linear(d_in, d_out, bias=False, device=device, dtype=torch.bfloat16)
        layer = _torchao_layer(name, layer) if name != "bf16" else layer
    else:
        layer = ms.Linear(d_in, d_out, bias=False, recipe=name).to(device)
    return torch.compile(layer) if option == "compile" else layer


def _settings(recipe: str):
    """The kernel settings of ``recipe@NAME`` (``bench_train.kernel_settings``; none for a
    plain recipe or ``@compile``)."""
    option = recipe.partition("@")[2]
    if option in ("", "compile"):
        return contextlib.nullcontext()
    import bench_train
    if option not in bench_train.KERNEL_SETS:
        raise ValueError(f"{recipe!r}: {option!r} is neither 'compile' nor a kernel set of "
                         "bench_train.KERNEL_SETS")
    return bench_train.kernel_settings(recipe)


def profile_step(recipe, tokens, d_in, d_out, device) -> str:
    """A torch.profiler table of one warm step: which kernels (GEMM, quantize, ...) cost what."""
    from torch.profiler import ProfilerActivity, profile
    layer = make_layer(recipe, d_in, d_out, device)
    x = torch.randn(tokens, d_in, device=device, dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(tokens, d_out, device=device, dtype=torch.bfloat16)
    layer(x).backward(dy)                                    # warm-up (compiles kernels)
    x.grad = None                       # as a timed step: no gradient accumulation kernels
    for p in layer.parameters():
        p.grad = None
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts) as prof:
        layer(x).backward(dy)
        if device.type == "cuda":
            torch.cuda.synchronize()
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=key, row_limit=12, max_name_column_width=60)


def run(recipe, tokens, d_in, d_out, device, tiny):
    g = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(tokens, d_in, device=device, dtype=torch.bfloat16, generator=g)
    x.requires_grad_(True)
    dy = torch.randn(tokens, d_out, device=device, dtype=torch.bfloat16, generator=g)
    row = {"recipe": recipe}
    try:
        with _settings(recipe):
            _time_row(row, recipe, tokens, d_in, d_out, device, tiny, x, dy)
    except Exception as err:  # noqa: BLE001 -- a row reports its failure; the others still run
        row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:140]}"
    return row


def _time_row(row, recipe, tokens, d_in, d_out, device, tiny, x, dy) -> None:
    """Fill ``row``: eager and graph-replayed step times, saved bytes."""
    layer = make_layer(recipe, d_in, d_out, device)

    def step():
        x.grad = None
        for p in layer.parameters():
            p.grad = None
        layer(x).backward(dy)

    row["ms"] = bench_ms(step, device, tiny)
    row["graph_ms"] = _graph_ms(step, device)
    row["saved_bytes"] = saved_bytes(layer, x)
    row["x_saved_bytes"] = _x_saved_formula(recipe, d_in, tokens)
    if device.type == "cuda":
        torch.cuda.synchronize()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tiny", action="store_true", help="tokens 64, 256 -> 384 (smoke test)")
    p.add_argument("--tokens", type=int, default=16384)
    p.add_argument("--d-in", type=int, default=4096)
    p.add_argument("--d-out", type=int, default=14336)
    p.add_argument("--recipes", default=",".join(RECIPES),
                   help="comma-separated: recipes, torchao peers, either with '@compile'")
    p.add_argument("--torchao", action="store_true", help="add " + ", ".join(TORCHAO))
    p.add_argument("--profile", default="",
                   help="comma-separated recipes to break down by kernel (torch.profiler)")
    args = p.parse_args(argv)
    tokens, d_in, d_out = (64, 256, 384) if args.tiny else (args.tokens, args.d_in, args.d_out)
    device = torch.device(args.device)
    if common is not None and hasattr(common, "env_header"):
        print(common.env_header())
    else:
        print(f"torch {torch.__version__}, device {device}")
    rows = [run("bf16", tokens, d_in, d_out, device, args.tiny)]
    names = [r for r in args.recipes.split(",") if r] + (list(TORCHAO) if args.torchao else [])
    rows += [run(r, tokens, d_in, d_out, device, args.tiny) for r in names]
    base, gbase = rows[0].get("ms"), rows[0].get("graph_ms")
    print(f"\nLinear fwd+bwd, tokens={tokens}, {d_in} -> {d_out}, x/dy bf16")
    print(f"{'recipe':<28}{'ms':>9}{'x bf16':>8}{'graph ms':>10}{'x bf16':>8}"
          f"{'saved MiB':>11}{'x MiB':>8}{'target':>8}")
    for r in rows:
        if "error" in r:
            print(f"{r['recipe']:<28}  error: {r['error']}")
            continue
        r["ratio"] = r["ms"] / base if base else None
        g = r.get("graph_ms")
        r["graph_ratio"] = g / gbase if g and gbase else None
        tgt = TARGETS.get(r["recipe"].partition("@")[0])
        gcols = f"{g:>10.3f}{r['graph_ratio']:>8.2f}" if r["graph_ratio"] else f"{'-':>10}{'-':>8}"
        print(f"{r['recipe']:<28}{r['ms']:>9.3f}{r['ratio']:>8.2f}{gcols}"
              f"{r['saved_bytes'] / 2**20:>11.1f}{r['x_saved_bytes'] / 2**20:>8.1f}"
              f"{(f'<={tgt}' if tgt else ''):>8}")
    print("ms: triton do_bench, launched eagerly (host time included); graph ms: replayed from a\n"
          "CUDA graph (kernels only, as a graph-captured training step). saved MiB: every tensor\n"
          "autograd keeps (x's quantized view, the quantized weight a dgrad reuses, scales);\n"
          "x MiB: the activation x alone (nn.linear's accounting).")
    for recipe in [r for r in args.profile.split(",") if r]:
        print(f"\n{recipe}: device time by kernel, one fwd+bwd step (top 12)")
        print(profile_step(recipe, tokens, d_in, d_out, device))
    result = {"bench": "linear", "device": str(device), "tokens": tokens, "d_in": d_in,
              "d_out": d_out, "rows": rows}
    if common is not None and hasattr(common, "json_line"):
        common.json_line(result)
    else:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
