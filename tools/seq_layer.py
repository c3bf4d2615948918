"""One layer's launches, forward and backward, from a ``bench_train.py --profile`` run.

    python tools/seq_layer.py benchmarks/results/<run>/train_1b.seq.json [LAYER] [--by-name]

``bench_train.py`` writes every profiled step's launches in stream order beside ``--out``
(``*.seq.json``: ``{"<model> <recipe>": [[kernel name, µs, idle µs before it], ...]}``). The
replayed step's launches carry no shapes, so this cuts the sequence at attention's kernels,
which run once a layer: the launches from one flash forward to the next (the tail of one
layer's attention, then the next layer's MLP and attention projections) and from one flash
backward to the next, for every profiled recipe, to compare a quantized layer's launches with
bf16's one by one. ``--by-name``: per kernel name, launches and µs of each recipe's layer side
by side instead (two profiles of one change, e.g. ``nvfp4`` and ``nvfp4@SET``). Not run in CI.
"""

from __future__ import annotations

import json
import sys


def layer_parts(seq: list, layer: int) -> dict:
    """``{"forward": launches, "backward": launches}`` between attention's ``layer``-th and
    next flash kernels of each direction."""
    out = {}
    for name, key in (("forward", "flash_fprop"), ("backward", "flash_bprop")):
        idx = [i for i, s in enumerate(seq) if key in s[0]]
        if layer + 1 >= len(idx):
            raise ValueError(f"{len(idx)} {key} launches: no layer {layer} to the next")
        out[name] = seq[idx[layer]:idx[layer + 1]]
    return out


def by_name(part: list) -> dict:
    """``{kernel name: [launches, µs]}`` of a list of launches."""
    out: dict = {}
    for name, us, _ in part:
        n, t = out.get(name, (0, 0.0))
        out[name] = [n + 1, t + us]
    return out


def _print_by_name(seqs: dict, layer: int) -> None:
    keys = list(seqs)
    for direction in ("forward", "backward"):
        tables = [by_name(layer_parts(seqs[k], layer)[direction]) for k in keys]
        names = sorted({n for t in tables for n in t}, key=lambda n: -max(
            t.get(n, (0, 0.0))[1] for t in tables))
        print(f"--- {direction}, layer {layer}: launches × µs, " + " | ".join(keys))
        for n in names:
            cells = [f"{t[n][0]:3d} × {t[n][1]:8.1f}" if n in t else " " * 14 for t in tables]
            print("  " + " | ".join(cells) + f"  {n}")


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    flags = [a for a in argv if a.startswith("--")]
    args = [a for a in argv if not a.startswith("--")]
    with open(args[0]) as f:
        seqs = json.load(f)
    layer = int(args[1]) if len(args) > 1 else 8
    if "--by-name" in flags:
        _print_by_name(seqs, layer)
        return
    for key, seq in seqs.items():
        print(f"===== {key}: {len(seq)} launches, {sum(s[1] for s in seq) / 1e3:.2f} ms busy, "
              f"{sum(s[2] for s in seq) / 1e3:.2f} ms idle between them")
        for name, part in layer_parts(seq, layer).items():
            print(f"--- {name}: {len(part)} launches, {sum(s[1] for s in part):.0f} µs busy, "
                  f"{sum(s[2] for s in part):.0f} µs idle")
            for s in part:
                print(f"  {s[1]:8.1f} {s[2]:6.1f}  {s[0]}")


if __name__ == "__main__":
    main()
