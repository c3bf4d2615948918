"""Host Python per op call, measured on any CPU: the kernel wrappers with the kernels stubbed out.

``bench_host.py`` times the host cost of microscale's ops on a GPU machine, where it is what a
step that is not one CUDA graph pays per op (FSDP2, DDP, a Hugging Face model, ``torch.compile``
without the harness's step graph). This script isolates the part of it that is microscale's own
Python: it runs the ops with ``backend="triton"`` under Triton's interpreter on CPU tensors with
every kernel body replaced by a no-op, so what is timed is the ops layer, the dispatch, the
kernel wrappers' checks and planning, their tensor allocations and the launch bookkeeping; not
the kernels, not the CUDA driver, and not the bf16 GEMM of the emulated formats (one cuBLAS call
on CUDA, an fp32 matmul here: replaced by allocating its result). It also counts the torch
(aten) calls each op makes inside (on CUDA each is a few µs of dispatcher and allocator time; a
``zeros`` or ``clone`` is a kernel launch as well) and the Triton launches.

    python benchmarks/bench_host_stub.py [--recipes nvfp4,fp8_blockwise] [--n 128] [--src DIR]

The op calls are those of one ``ms.Linear(n, n)`` forward + backward, recorded and replayed one
by one through the dispatcher (as a compiled graph calls them); the last row is the whole eager
layer step. Operands are tiny (n × n, default 128) so that tensor work stays negligible.
Absolute µs depend on the CPU: compare runs on one machine (``--src`` measures another
checkout's sources, e.g. a ``git archive`` of an earlier commit). The last line is JSON.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import sys
import time
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"          # before triton is imported

import torch  # noqa: E402
import triton.runtime.interpreter as _interp  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

# --src DIR: measure another checkout's sources (an A/B on one machine, e.g. a `git archive`)
_SRC = sys.argv[sys.argv.index("--src") + 1] if "--src" in sys.argv else \
    str(Path(__file__).resolve().parents[1] / "src")
sys.path[:0] = [str(Path(__file__).resolve().parent), _SRC]
import common  # noqa: E402

import microscale as ms  # noqa: E402
from microscale import ops, ops_gemm  # noqa: E402
from microscale.recipe import Recipe  # noqa: E402

LAUNCHES: collections.Counter = collections.Counter()


def _stub_run(self, *args, **kwargs):          # InterpretedFunction.run without the kernel
    LAUNCHES[getattr(getattr(self, "fn", None), "__name__", "kernel")] += 1


_interp.InterpretedFunction.run = _stub_run


def _stub_gemm() -> None:
    """The CPU form of the emulated GEMM is an fp32 matmul (milliseconds here); on CUDA it is one
    cuBLAS call. Replaced by one allocation of the result, so the GEMM counts as one aten call.
    Each stub replaces the name where its caller looks it up: ``_mm_fp32_out`` in ``gemm_alpha``
    (``_bf16_gemm_with_factor``'s module), ``_bf16_gemm_with_factor`` in ``gemm_fp4`` (whose
    dequant path calls it)."""
    from microscale.kernels import gemm_alpha, gemm_fp4
    gemm_alpha._mm_fp32_out = \
        lambda a, b: a.new_empty((a.shape[0], b.shape[0]), dtype=torch.float32)
    gemm_fp4._bf16_gemm_with_factor = \
        lambda a, b, f, out_dtype, epilogue=None: a.new_empty((a.shape[0], b.shape[0]),
                                                               dtype=out_dtype)


class _CountAten(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls: collections.Counter = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        if not name.startswith("aten.detach"):   # the mode's own artefact, not a call the op makes
            self.calls[name] += 1
        return func(*args, **(kwargs or {}))


def host_us(fn, calls: int = 300, warmup: int = 20) -> float:
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(3):                          # best of three: this machine's noise
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
    return best


class _Record(TorchDispatchMode):
    """Records the microscale op calls (overload and arguments) a layer makes."""

    def __init__(self):
        super().__init__()
        self.calls: list = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "microscale":
            self.calls.append((func, args, kwargs or {}))
        return func(*args, **(kwargs or {}))


def _short(func, args) -> str:
    name = func.__name__.split(".")[0]
    shape = "x".join(str(d) for d in args[0].shape)
    return f"{name} {shape} {args[0].dtype}".replace("torch.", "")


def cases(recipe_name: str, n: int):
    """``(name, call, impl)`` for every op call one forward + backward of an
    ``ms.Linear(n, n)`` makes, exactly as it makes them (recorded): ``call`` re-runs it through
    the dispatcher, as a compiled graph calls it (timed), ``impl`` the op's implementation
    directly (the torch calls inside it are counted); plus the whole eager layer step."""
    torch.manual_seed(0)
    recipe = dataclasses.replace(Recipe.parse(recipe_name), backend="triton")
    layer = ms.Linear(n, n, bias=False, recipe=recipe)
    x = torch.randn(n, n, dtype=torch.bfloat16, requires_grad=True)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            layer(x).float().sum().backward()

    step()
    with _Record() as rec:
        step()
    impls = {"quantize_rowcol": ops._quantize_rowcol_op, "quantize": ops._quantize_op,
             "scaled_mm": ops_gemm._scaled_mm_op, "hp_mm": ops_gemm._hp_mm_op,
             "expand": ops_gemm._expand_op}
    out = [(_short(f, a), lambda f=f, a=a, k=k: f(*a, **k),
            lambda f=f, a=a, k=k: impls[f.__name__.split(".")[0]](*a, **k))
           for f, a, k in rec.calls]
    return out + [("ms.Linear fwd+bwd (eager)", step, step)]


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipes", default="nvfp4,fp8_blockwise,fp8_tensorwise,mxfp8,mxfp4")
    p.add_argument("--n", type=int, default=128)
    p.add_argument("--src", default=_SRC, help="the microscale sources to measure (default: this "
                   "checkout's src/)")
    args = p.parse_args(argv)
    _stub_gemm()
    rows = []
    for recipe in args.recipes.split(","):
        for what, fn, impl in cases(recipe, args.n):
            fn()
            LAUNCHES.clear()
            with _CountAten() as mode:            # inside the op: its implementation's calls
                impl()
            launches = sum(LAUNCHES.values())
            rows.append({"recipe": recipe, "op": what, "host_us": round(host_us(fn), 1),
                         "aten_calls": sum(mode.calls.values()), "launches": launches,
                         "aten": dict(mode.calls)})
    print(common.fmt_table(rows, ["recipe", "op", "host_us", "aten_calls", "launches"]))
    result = {"bench": "host_stub", "n": args.n, "src": args.src, "torch": torch.__version__,
              "rows": rows}
    common.json_line(result)
    return result


if __name__ == "__main__":
    main()
