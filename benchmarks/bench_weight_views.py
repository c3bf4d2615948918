"""What an NVFP4 layer's weights cost per step: both 16×16 views as codes vs one expanded view.

    python benchmarks/bench_weight_views.py                  # 125m and 1b weight shapes
    python benchmarks/bench_weight_views.py --models 1b

A layer quantized with the nvfp4 recipes needs W for fprop and Wᵀ for dgrad, both with 16×16
tiles (SPEC §3), from the fp32 master. Paths timed per weight shape (CUDA-graph replayed, so
kernels only), summed over a model's quantized layers:

* ``codes``: the two views as codes (``quantize_rowcol``, the amax pass included), then each
  decoded to bf16 by the GEMM's dequantize pass (what a step runs when B is given as codes);
* ``expanded``: one view, 2D, written expanded (bf16 ``value · tile_scale``, ``tensor.py``):
  since a 16×16-tiled quantization commutes with the transpose, Wᵀ's expanded view is the
  transpose of W's, and no dequantize pass runs for either GEMM;
* ``expanded+copy``: as ``expanded`` plus a contiguous copy of the transpose (the cost if the
  dgrad GEMM could not read B as ``[K, N]``).

Prints a table and ends with one JSON line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

from microscale.kernels.gemm_fp4 import dequantize_bf16  # noqa: E402
from microscale.ops import quantize_views  # noqa: E402
from microscale.tensor import QFormat  # noqa: E402
from microscale.train.model import MODEL_CONFIGS  # noqa: E402

NV2D = (QFormat.NVFP4, {"block_2d": True, "check_finite": False})


def weight_shapes(name: str) -> list[tuple[tuple[int, int], int]]:
    """``((out, in), count)`` of the quantized block linears (the last 15% of blocks stay
    high precision, as the nvfp4 recipes keep them)."""
    c = MODEL_CONFIGS[name]
    d, kv = c.d_model, c.d_model // c.n_heads * c.n_kv_heads
    layers = c.n_layers - round(0.15 * c.n_layers)
    return [((d, d), 2 * layers), ((kv, d), 2 * layers), ((c.hidden_dim, d), layers),
            ((d, c.hidden_dim), layers)]


def paths(w: torch.Tensor) -> dict:
    def codes():
        q_w, q_wt = quantize_views(w, NV2D, NV2D, "triton")
        return dequantize_bf16(q_w), dequantize_bf16(q_wt)

    def expanded():
        q_w, _ = quantize_views(w, (NV2D[0], {**NV2D[1], "expand": True}), None, "triton")
        return q_w.data

    def expanded_copy():
        return expanded().t().contiguous()

    return {"codes": codes, "expanded": expanded, "expanded+copy": expanded_copy}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="125m,1b")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_weight_views needs a CUDA device")
    print(common.env_header())
    rows, totals = [], {}
    for model in args.models.split(","):
        for (n, k), count in weight_shapes(model):
            w = torch.randn(n, k, device="cuda") * 0.02
            for name, fn in paths(w).items():
                fn()
                t = common.graph_ms(fn)
                rows.append({"model": model, "shape": f"{n}x{k}", "count": count, "path": name,
                             "us": None if t is None else round(t * 1e3, 1)})
                if t is not None:
                    totals[model, name] = totals.get((model, name), 0.0) + t * count
    print(common.fmt_table(rows, ["model", "shape", "count", "path", "us"]))
    summary = [{"model": m, "path": p, "ms_per_step": round(v, 3)} for (m, p), v in totals.items()]
    print(common.fmt_table(summary, ["model", "path", "ms_per_step"]))
    common.json_line({"bench": "weight_views", "env": common.env_info(), "results": rows,
                      "per_step": summary})


if __name__ == "__main__":
    main()
