"""Saved-activation memory of one linear layer per recipe, measured, vs a bf16 nn.Linear.

A linear layer keeps what wgrad (dW = dyᵀ x) needs from x until backward. nn.Linear keeps x
(bf16: 2 bytes per element); ms.Linear keeps the *quantized* xᵀ (codes + block scales), e.g.
NVFP4 = 4 bits + one E4M3 byte per 16 elements = 4.5 bits. This script measures it: it runs the
forward pass under ``torch.autograd.graph.saved_tensors_hooks``, sums the bytes of every saved
tensor at two token counts, and reports the difference per token (the weight-side tensors are
constant and cancel). It checks the measurement against ``saved_activation_bytes``.

    python benchmarks/memory_saved_activations.py [--in-features 4096] [--out-features 256]

Prints a table, then one JSON line (bytes per token per recipe, and the ratio to bf16).
"""

from __future__ import annotations

import argparse
import json

import torch
from torch import nn

import microscale as ms
from microscale.nn.linear import saved_activation_bytes
from microscale.recipe import PRESETS, Recipe


def saved_bytes(layer: nn.Module, x: torch.Tensor) -> int:
    """Bytes of every tensor autograd saves during ``layer(x)``."""
    sizes = []

    def pack(t):
        sizes.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        layer(x)
    return sum(sizes)


def per_token(make_layer, in_features: int, dtype: torch.dtype, t1: int, t2: int) -> float:
    layer = make_layer()
    b1, b2 = (saved_bytes(layer, torch.randn(t, in_features, dtype=dtype, requires_grad=True))
              for t in (t1, t2))
    return (b2 - b1) / (t2 - t1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--in-features", type=int, default=4096)
    ap.add_argument("--out-features", type=int, default=256)
    ap.add_argument("--tokens", type=int, nargs=2, default=(128, 256),
                    help="two token counts (multiples of 128 so no recipe pads)")
    ap.add_argument("--recipes", nargs="*", default=list(PRESETS))
    args = ap.parse_args()
    n_in, n_out, (t1, t2) = args.in_features, args.out_features, args.tokens
    torch.manual_seed(0)

    bf16 = per_token(lambda: nn.Linear(n_in, n_out, dtype=torch.bfloat16), n_in,
                     torch.bfloat16, t1, t2)
    rows = {"nn.Linear bf16": bf16}
    for name in args.recipes:
        rows[name] = per_token(lambda: ms.Linear(n_in, n_out, recipe=name), n_in,
                               torch.bfloat16, t1, t2)
        formula = (saved_activation_bytes(name, n_in, t2) - saved_activation_bytes(name, n_in, t1))
        if abs(formula / (t2 - t1) - rows[name]) > 1e-9:
            raise SystemExit(f"{name}: measured {rows[name]} B/token, formula "
                             f"{formula / (t2 - t1)} B/token")

    print(f"saved activations of one linear layer, in_features={n_in} "
          f"(per token, measured with saved_tensors_hooks)")
    print(f"{'recipe':<16} {'wgrad xᵀ operand':<24} {'bytes/token':>12} {'bits/elem':>10} "
          f"{'vs bf16':>8}")
    for name, b in rows.items():
        what = "x bf16" if name.startswith("nn.") else str(Recipe.from_name(name).wgrad.b)
        if not name.startswith("nn.") and not Recipe.from_name(name).wgrad.quantized:
            what = "x " + str(Recipe.from_name(name).compute_dtype).replace("torch.", "")
        print(f"{name:<16} {what:<24} {b:>12.1f} {8 * b / n_in:>10.3f} {b / bf16:>7.1%}")
    print(json.dumps({"benchmark": "memory_saved_activations", "in_features": n_in,
                      "bytes_per_token": rows,
                      "ratio_vs_bf16": {k: v / bf16 for k, v in rows.items()}}))


if __name__ == "__main__":
    main()
