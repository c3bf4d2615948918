"""One layer's launches, forward and backward, from a ``bench_train.py --profile`` run.

    python tools/seq_layer.py benchmarks/results/<run>/train_1b.seq.json [LAYER]

``bench_train.py`` writes every profiled step's launches in stream order beside ``--out``
(``*.seq.json``: ``{"<model> <recipe>": [[kernel name, µs, idle µs before it], ...]}``). The
replayed step's launches carry no shapes, so this cuts the sequence at attention's kernels,
which run once a layer: the launches from one flash forward to the next (the tail of one
layer's attention, then the next layer's MLP and attention projections) and from one flash
backward to the next, for every profiled recipe, to compare a quantized layer's launches with
bf16's one by one. Not run in CI.
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


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    seqs = json.load(open(argv[0]))
    layer = int(argv[1]) if len(argv) > 1 else 8
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
