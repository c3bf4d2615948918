"""Target program for Nsight Compute: one MLP of a zoo model, converted, forward + backward as
training runs it, the second pass inside a profiler range.

Session 51's profile put half of 1b nvfp4's quantize time on the MLP's two 16384×8192 tensors
(the down projection's input relu²(u), recomputed from u in backward, and the up projection's
gradient du, written by the dgrad GEMM's epilogue): their column views ~253 µs a launch, row
views ~156 µs, amax passes ~88 µs. ``bench_quant``'s variants time one input; here the
quantizers run with the prologues, amaxes and expanded outputs training gives them.

    ncu --profile-from-start off -k regex:"nvfp4_(rowcol_reg|row|amax_reg)_kernel" \\
        --section SpeedOfLight --section Occupancy --section WarpStateStats ... \\
        python benchmarks/ncu_mlp_block.py --model 1b --recipe nvfp4
    python benchmarks/ncu_mlp_block.py --model micro --device cpu   # the driver itself

The first pass compiles; the second runs between ``torch.cuda.profiler.start()`` and
``stop()`` (Nsight Compute's ``--profile-from-start off`` profiles only there). It prints each
quantize call's shape and what it was asked (``ms.explain``'s paths), so the profiled launches
can be told apart by their grids and durations.
"""

from __future__ import annotations

import argparse
import sys

import torch

import microscale as ms
from bench_block import build, inputs, step          # the MLP, its inputs and step, as there
from microscale.train.model import MODEL_CONFIGS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="1b", choices=sorted(MODEL_CONFIGS))
    ap.add_argument("--recipe", default="nvfp4")
    ap.add_argument("--tokens", type=int, default=16384, help="batch × sequence")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args(argv)
    mlp = build(args.model, "mlp", args.recipe, "auto", args.device, False)
    d = MODEL_CONFIGS[args.model].d_model
    x, dy, _ = inputs(args.model, "mlp", args.tokens, 0, args.device)
    step(mlp, x, dy)                                   # compiles every kernel
    mlp.zero_grad(set_to_none=True)
    x.grad = None
    cuda = args.device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
    step(mlp, x, dy)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    print(f"{args.model} MLP, {args.recipe}, {args.tokens} tokens: d {d}, "
          f"hidden {MODEL_CONFIGS[args.model].hidden_dim}")
    print(ms.explain(mlp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
