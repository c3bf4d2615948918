"""Can Inductor generate our quantizers? The pure-PyTorch reference under ``torch.compile``
against the hand-written Triton kernels: bit-exactness and time, at training shapes.

If Inductor's code is exact and as fast, a compiled training step could fuse quantization into
the op that produces x (the norm, the activation) instead of reading x again. Timed with CUDA
graphs over 20 calls (no host overhead in the figure).

    python benchmarks/inductor_quant.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

from microscale.ops import quantize_views  # noqa: E402
from microscale.quant.fp8 import quantize_fp8_block  # noqa: E402
from microscale.quant.nvfp4 import quantize_nvfp4  # noqa: E402
from microscale.tensor import QFormat  # noqa: E402


def graph_us(fn, reps: int = 20) -> float:
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(5):
        start.record()
        g.replay()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) * 1e3 / reps)
    return best


def fp8_rowcol_ref(x):
    r = quantize_fp8_block(x, check_finite=False)
    c = quantize_fp8_block(x.t(), check_finite=False)
    return r.data, r.scale, c.data, c.scale


def nvfp4_rows_ref(x):
    q = quantize_nvfp4(x, check_finite=False)
    return q.data, q.scale


def fp8_rowcol_kernel(x):
    opts = {"block": (1, 128), "check_finite": False}
    r, c = quantize_views(x, (QFormat.FP8_BLOCK, opts), (QFormat.FP8_BLOCK, opts), "auto")
    return r.data, r.scale, c.data, c.scale


def nvfp4_rows_kernel(x):
    r, _ = quantize_views(x, (QFormat.NVFP4, {"check_finite": False}), None, "auto")
    return r.data, r.scale


def main() -> dict:
    dev = torch.device("cuda")
    rows = []
    cases = (("fp8 1x128 row+col", fp8_rowcol_ref, fp8_rowcol_kernel),
             ("nvfp4 1x16 rows RNE", nvfp4_rows_ref, nvfp4_rows_kernel))
    for shape in ((16384, 768), (16384, 3072)):
        x = torch.randn(shape, device=dev, dtype=torch.bfloat16) * 3
        copy_us = graph_us(lambda: x.clone())
        for name, ref, kern in cases:
            entry = {"case": name, "shape": list(shape), "copy_us": copy_us}
            try:
                compiled = torch.compile(ref, fullgraph=True, dynamic=False)
                got, want = compiled(x), kern(x)
                entry["exact"] = all(torch.equal(a.view(torch.uint8) if a.dtype.itemsize == 1 else a,
                                                 b.view(torch.uint8) if b.dtype.itemsize == 1 else b)
                                     for a, b in zip(got, want))
                entry["inductor_us"] = graph_us(lambda: compiled(x))
            except Exception as err:                       # report, keep measuring
                entry["error"] = f"{type(err).__name__}: {str(err)[:300]}"
            entry["kernel_us"] = graph_us(lambda: kern(x))
            rows.append(entry)
            print(entry, flush=True)
    result = {"env": common.env_info(), "bench": "inductor_quant", "rows": rows}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
