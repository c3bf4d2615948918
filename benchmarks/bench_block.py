"""One zoo block (or its MLP) forward + backward per recipe and kernel set, replayed from CUDA
graphs in turn, in one process: a quantizer A/B in training's own order.

    python benchmarks/bench_block.py --model 1b --recipes bf16,nvfp4,nvfp4@nv-colrne-p4
    python benchmarks/bench_block.py --model 1b --part block --repeat 7
    python benchmarks/bench_block.py --model micro --device cpu --tokens 64 --backend reference

Why: a quantize kernel timed alone (``bench_quant.py``: its amax given, L2 flushed before it)
does not see what training gives it: the amax pass that read the same tensor just before (its
last tiles still in L2), the prologue (relu² recomputed from u), the expanded outputs, the
GEMMs around it. Session 52 found a column-view tile 5% faster alone and 0.8 ms a step slower
in 1b training. A whole step (``bench_train.py``) sees all of that, but 0.2 ms is ~0.1% of a
1b step, inside its spread from run to run. Here the unit is one block's forward and backward
(the 1b MLP's six GEMMs are 3.3 TFLOP), built as the zoo builds it (the relu² MLP one autograd
node, the down projection's input recomputed in backward; bf16 autocast), converted with every
projection quantized, and captured in a CUDA graph per row. The graphs are then replayed in
turn (A, B, A, B, ...) for ``--repeat`` rounds, L2 flushed before each replay
(``common.bench_ms``).

Rows: ``recipe`` or ``recipe@SET`` (``bench_train.KERNEL_SETS``: the settings hold while the
row compiles and is captured, and a graph keeps the launches it captured). A ``bf16`` row is
the block not converted. ``--compile`` (default on CUDA) compiles every row's block, as
``bench_train.py`` compiles blocks. Prints per row the median over rounds, its range, its speed
× the first bf16 row and × the first quantized row, and ends with one JSON line. Off CUDA (no
graphs) each row is timed eagerly, once a round.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import microscale as ms  # noqa: E402
from microscale.train.model import MODEL_CONFIGS, MLP, Block, _rope_tables  # noqa: E402


def build(model: str, part: str, recipe: str, backend: str, device, compile_: bool):
    """The zoo model's MLP or block, every projection quantized (``recipe`` less its
    ``@SET``; bf16: not converted), compiled where asked."""
    torch.manual_seed(0)
    cfg = MODEL_CONFIGS[model]
    mod = (MLP(cfg) if part == "mlp" else Block(cfg)).to(device)
    name = recipe.partition("@")[0]
    if name != "bf16":
        rec = ms.Recipe.parse(name)
        if backend != "auto":
            rec = dataclasses.replace(rec, backend=backend)
        ms.convert(mod, rec, keep_high_precision=[])
    return torch.compile(mod) if compile_ else mod


def inputs(model: str, part: str, tokens: int, seq: int, device):
    """``(x, dy, extra)``: the MLP's bf16 input ``[tokens, d]`` (the norm's output), or the
    block's fp32 residual stream ``[tokens / seq, seq, d]`` with the rope tables."""
    cfg = MODEL_CONFIGS[model]
    g = torch.Generator(device=device).manual_seed(1)
    if part == "mlp":
        x = torch.randn(tokens, cfg.d_model, device=device, generator=g).bfloat16()
        extra = ()
    else:
        seq = min(seq, tokens, cfg.max_seq_len)
        x = torch.randn(tokens // seq, seq, cfg.d_model, device=device, generator=g)
        cos, sin = _rope_tables(cfg)
        extra = (cos[:seq].to(device), sin[:seq].to(device))
    dy = torch.randn(x.shape, device=device, generator=g).to(x.dtype)
    return x.requires_grad_(True), dy, extra


def step(mod, x: torch.Tensor, dy: torch.Tensor, extra=()) -> None:
    """Forward under bf16 autocast and backward, as the harness's step runs a block."""
    with torch.autocast(x.device.type, dtype=torch.bfloat16):
        y = mod(x, *extra)
    y.backward(dy)


def _settings(recipe: str):
    import bench_train
    name = recipe.partition("@")[2]
    if name and name not in bench_train.KERNEL_SETS:
        raise ValueError(f"{recipe!r}: {name!r} is not a kernel set of bench_train.KERNEL_SETS")
    return bench_train.kernel_settings(recipe)


def prepare(recipe: str, args, device):
    """The row's timed callable: its step captured in a CUDA graph (its replay), or the step
    itself off CUDA; built, compiled and warmed under the row's kernel settings."""
    with _settings(recipe):
        mod = build(args.model, args.part, recipe, args.backend, device, args.compile)
        x, dy, extra = inputs(args.model, args.part, args.tokens, args.seq, device)

        def run_step():
            step(mod, x, dy, extra)

        if device.type != "cuda":
            run_step()
            return run_step
        from microscale.train.speed import warmup_stream     # one stream: no workspace leak
        side = warmup_stream(device)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):                               # compiles, then settles
                run_step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run_step()
        torch.cuda.synchronize()
        return _Replay(graph, (mod, x, dy, extra))


class _Replay:
    """A captured graph's replay that keeps what the graph reads and writes alive: a CUDA
    graph holds raw addresses, not tensors, so the module, its parameters and gradients and
    the inputs must outlive every replay (freed, their memory is reused and a replay reads
    or writes someone else's: session 53's first call died of it)."""

    def __init__(self, graph, alive):
        self.graph, self.alive = graph, alive

    def __call__(self) -> None:
        self.graph.replay()


def _time(fn, device) -> float:
    """ms of one call: CUDA's median of replays (L2 flushed before each), else one call."""
    if device.type == "cuda":
        return common.bench_ms(fn)
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def run(args, device) -> list[dict]:
    """Every row prepared, then timed in turn for ``args.repeat`` rounds."""
    recipes = [r for r in args.recipes.split(",") if r]
    rows, fns = [], []
    for recipe in recipes:
        row = {"recipe": recipe, "times_ms": []}
        try:
            fns.append(prepare(recipe, args, device))
        except Exception as err:  # noqa: BLE001 -- a row that fails is reported, not fatal
            row["error"] = f"{type(err).__name__}: {err}"[:200]
            fns.append(None)
        rows.append(row)
    for _ in range(args.repeat):
        for row, fn in zip(rows, fns):
            if fn is not None:
                row["times_ms"].append(_time(fn, device))
    for row in rows:
        if row["times_ms"]:
            row["ms"] = statistics.median(row["times_ms"])
    return rows


def _ratios(rows: list[dict]) -> None:
    """``x_bf16``: the first bf16 row's time over this row's (speed × bf16);
    ``x_first``: the same against the first quantized row."""
    timed = [r for r in rows if "ms" in r]
    bf16 = next((r["ms"] for r in timed if r["recipe"] == "bf16"), None)
    first = next((r["ms"] for r in timed if r["recipe"].partition("@")[0] != "bf16"), None)
    for r in timed:
        r["x_bf16"] = bf16 / r["ms"] if bf16 else None
        r["x_first"] = first / r["ms"] if first else None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="1b", choices=sorted(MODEL_CONFIGS))
    p.add_argument("--part", default="mlp", choices=("mlp", "block"))
    p.add_argument("--recipes", default="bf16,nvfp4",
                   help="comma-separated rows: recipe or recipe@SET (bench_train.KERNEL_SETS)")
    p.add_argument("--tokens", type=int, default=16384, help="batch × sequence")
    p.add_argument("--seq", type=int, default=2048, help="sequence length (--part block)")
    p.add_argument("--repeat", type=int, default=5, help="rounds of the rows in turn")
    p.add_argument("--backend", default="auto", help="the recipes' backend (auto, reference)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help="torch.compile every row's block (default: on CUDA)")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    args.compile = device.type == "cuda" if args.compile is None else args.compile
    print(common.env_header())
    rows = run(args, device)
    _ratios(rows)
    print(f"\n{args.model} {args.part}, {args.tokens} tokens, fwd+bwd, "
          f"{'CUDA graphs' if device.type == 'cuda' else 'eager'}, {args.repeat} rounds in turn")
    print(common.fmt_table([
        {"recipe": r["recipe"], "ms": r.get("ms"),
         "min-max": f"{min(r['times_ms']):.3f}-{max(r['times_ms']):.3f}" if r["times_ms"] else None,
         "x_bf16": r.get("x_bf16"), "x_first": r.get("x_first"), "error": r.get("error")}
        for r in rows], ["recipe", "ms", "min-max", "x_bf16", "x_first", "error"]))
    common.json_line({"bench": "block", "model": args.model, "part": args.part,
                      "tokens": args.tokens, "compile": args.compile, "device": str(device),
                      "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
