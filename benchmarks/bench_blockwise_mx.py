"""Can MXFP8 run through cuBLASLt's blockwise FP8 GEMM? What the design in ``gemm_notes.md``
(session 30, last section) needs to know before it is built, measured in one process.

    python benchmarks/bench_blockwise_mx.py                      # 8192^3 and 16384x8192x8192
    python benchmarks/bench_blockwise_mx.py --shapes 8192x8192x8192

Per shape, milliseconds (CUDA-graph replay where it captures) and the ratio to bf16 cuBLAS:

* ``F.scaled_mm`` blockwise with A 1x128 and B 128x128 or 1x128 scales, bf16 and fp32 output
  (a refusal is a row with its error: whether Hopper's cuBLASLt gives an fp32 output is the
  open question, since a bf16 output rounded before an exact correction is added would not be
  exact up to summation order);
* the fp32 output's cast to bf16 (the pass the fp32 route would add);
* the MXFP8 regroup pass per operand (``gemm_mxfp8_prepare.prepare_mx``, group 128);
* the relative error of each output against the fp32 reference product on 512 rows.

And per data kind, the share of (row, 128) groups of an MXFP8 operand that do not regroup to
one exponent (those the correction GEMMs would take). Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import common  # noqa: E402

import microscale as ms  # noqa: E402
from microscale.gemm import scaled_mm_reference  # noqa: E402
from microscale.kernels import gemm_fp8, gemm_mxfp8_prepare  # noqa: E402

SHAPES = [(8192, 8192, 8192), (16384, 8192, 8192), (16384, 4096, 11008)]
DATA = {                      # name -> tensor maker (rows, K, generator, device)
    "act N(0,1)": lambda r, k, g, d: torch.randn(r, k, generator=g, device=d),
    "weight N(0,0.02)": lambda r, k, g, d: 0.02 * torch.randn(r, k, generator=g, device=d),
    "heavy tail": lambda r, k, g, d: torch.randn(r, k, generator=g, device=d)
    * torch.exp(torch.randn(r, k, generator=g, device=d)),
}


def _time(fn) -> float:
    t = common.graph_ms(fn)
    return t if t is not None else common.bench_ms(fn)


def failing_share(q) -> float:
    """Share of (row, 128-wide group) of an MXFP8 tensor left with more than one exponent by
    the exact regroup (the groups an exact correction would have to cover)."""
    q_rg = gemm_mxfp8_prepare.regroup_mx(q, 128)
    s = q_rg.scale.view(q.rows, -1)
    ks = s.shape[1] - s.shape[1] % 4
    groups = s[:, :ks].view(q.rows, -1, 4)
    return (groups != groups[:, :, :1]).any(-1).float().mean().item()


def _rel_err(y, qa, qb) -> float:
    rows = min(512, qa.rows)
    qs = replace(qa, data=qa.data[:rows], scale=qa.scale[:rows], shape=torch.Size((rows, qa.cols)))
    ref = scaled_mm_reference(qs, qb)
    return ((y[:rows].float() - ref).norm() / ref.norm()).item()


def _blockwise(fa, fb, out_dtype):
    """``F.scaled_mm`` with every scale layout this torch may take, first that runs."""
    last = None
    for i in range(len(gemm_fp8._layouts(fa, "a"))):
        for j in range(len(gemm_fp8._layouts(fb, "b"))):
            args = gemm_fp8.blockwise_call_args(fa, fb, (i, j, out_dtype))
            try:
                F.scaled_mm(*args, output_dtype=out_dtype)
                return lambda args=args: F.scaled_mm(*args, output_dtype=out_dtype)
            except (RuntimeError, ValueError, NotImplementedError, TypeError) as err:
                last = err
    raise RuntimeError(str(last).splitlines()[0][:200])


def run(m, n, k, g) -> list[dict]:
    dev = "cuda"
    a_hp = DATA["act N(0,1)"](m, k, g, dev).bfloat16()
    b_hp = DATA["weight N(0,0.02)"](n, k, g, dev).bfloat16()
    ref = {"backend": "reference"}
    fa = ms.quantize(a_hp, "fp8_block", block=(1, 128), **ref)
    fbs = {"128x128": ms.quantize(b_hp, "fp8_block", block=(128, 128), **ref),
           "1x128": ms.quantize(b_hp, "fp8_block", block=(1, 128), **ref)}
    qa, qb = ms.quantize(a_hp, "mxfp8_e4m3", **ref), ms.quantize(b_hp, "mxfp8_e4m3", **ref)
    flop, rows, t_bf16 = 2.0 * m * n * k, [], None
    fns = {"bf16": lambda: (lambda: a_hp @ b_hp.t(), None)}
    for bname, fb in fbs.items():
        for od in (torch.bfloat16, torch.float32):
            fns[f"blockwise 1x128 x {bname} {str(od)[6:]}"] = \
                lambda fb=fb, od=od: (_blockwise(fa, fb, od), fb)
    y32 = torch.empty(m, n, device=dev)
    fns["cast fp32->bf16"] = lambda: (lambda: y32.to(torch.bfloat16), None)
    fns["regroup A (prepare_mx)"] = lambda: (lambda: gemm_mxfp8_prepare.prepare_mx(qa), None)
    fns["regroup B (prepare_mx)"] = lambda: (lambda: gemm_mxfp8_prepare.prepare_mx(qb), None)
    for name, make in fns.items():
        row = {"shape": f"{m}x{n}x{k}", "variant": name}
        try:
            fn, fb = make()
            y = fn()
            t = _time(fn)
            t_bf16 = t if name == "bf16" else t_bf16
            row.update(ms=t, ratio=t_bf16 / t)
            if fb is not None:
                row.update(tflops=flop / t / 1e9, out=str(y.dtype)[6:], rel_err=_rel_err(y, fa, fb))
        except Exception as err:  # noqa: BLE001 -- a row reports its failure and goes on
            row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
        rows.append(row)
    return rows


def shares(g) -> list[dict]:
    out = []
    for name, make in DATA.items():
        x = make(4096, 8192, g, "cuda").bfloat16()
        q = ms.quantize(x, "mxfp8_e4m3", backend="reference")
        out.append({"data": name, "failing_groups": failing_share(q)})
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default="", help="MxNxK,... (default: 8192^3, two larger)")
    args = p.parse_args(argv)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",") if s] or SHAPES
    g = torch.Generator(device="cuda").manual_seed(0)
    print(common.env_header())
    share_rows = shares(g)
    print(common.fmt_table(share_rows, ["data", "failing_groups"]), flush=True)
    rows = []
    for m, n, k in shapes:
        mine = run(m, n, k, g)
        print(common.fmt_table(mine, ["shape", "variant", "ms", "tflops", "ratio", "out",
                                      "rel_err", "error"]), flush=True)
        rows += mine
    common.json_line({"bench": "blockwise_mx", "env": common.env_info(), "shares": share_rows,
                      "rows": rows})


if __name__ == "__main__":
    main()
