"""MXFP8 GEMM on FP8 tensor cores: the Gluon kernel (``kernels/gemm_mxfp8_wgmma.py``) against
bf16 cuBLAS, the ``tl`` kernel, dequantize + cuBLAS and FP8 blockwise cuBLASLt, same process;
and FP8 1x128 x 1x128 (the fp8_blockwise wgrad's scaling) through cuBLASLt and through the
Gluon kernel (every step one chain, the fp32 scales applied per 128).

    python benchmarks/bench_mxfp8_wgmma.py                    # 8192^3, LLaMA-7B/70B shapes
    python benchmarks/bench_mxfp8_wgmma.py --shapes 8192x8192x8192 --data gaussian,outliers

Per shape and data kind: milliseconds (CUDA-graph replay where it captures, else do_bench),
TFLOP/s, ratio to bf16 (the issue-12 target: >= 1.4x at 8192^3, >= 1.2x at LLaMA shapes), the
prepare pass alone, the kernel alone on prepared operands, the share of one-chain K steps
(flags of A's and B's tiles both set) and the relative error against the fp32 reference on
512 rows. Data: ``gaussian`` (N(0,1) activations, N(0, 0.02) weights) or ``outliers`` (a block
2^6 larger in every 7th activation row: the per-chunk path), or, for the kernel's timing
alone, Gaussian with the flags forced: ``uniform`` (one chain every step: the ceiling) and
``perchunk`` (a chain per chunk every step: the floor). Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import common  # noqa: E402

import microscale as ms  # noqa: E402
from microscale.gemm import scaled_mm_reference  # noqa: E402
from microscale.kernels import gemm_fp4, gemm_fp8, gemm_mxfp8, gemm_mxfp8_wgmma  # noqa: E402

SHAPES = [(8192, 8192, 8192), (16384, 4096, 4096), (16384, 11008, 4096), (16384, 4096, 11008),
          (16384, 8192, 8192), (16384, 28672, 8192), (16384, 8192, 28672)]


def _time(fn) -> float:
    t = common.graph_ms(fn)
    return t if t is not None else common.bench_ms(fn)


def _operands(m, n, k, data, g):
    a = torch.randn(m, k, device="cuda", generator=g)
    if data == "outliers":
        a.view(m, -1, 128)[::7, :, 32:64] *= 64.0
    b = torch.randn(n, k, device="cuda", generator=g) * 0.02
    return a.bfloat16(), b.bfloat16()


def _prepared(qa, qb, data):
    """Both operands through the kernel's prepare pass (A's flags per 64 rows, B's per 128);
    ``uniform`` / ``perchunk`` force the flags: one chain every step / one per chunk."""
    prep_a = gemm_mxfp8.prepare_mx_wgmma(qa, 64)
    prep_b = gemm_mxfp8.prepare_mx_wgmma(qb, 128)
    if data in ("uniform", "perchunk"):
        fill = torch.ones_like if data == "uniform" else torch.zeros_like
        prep_a, prep_b = (p[:2] + (fill(p[2]),) for p in (prep_a, prep_b))
    return prep_a, prep_b


def _blockwise_prepared(q, rows_block: int, pad: int) -> tuple:
    """An FP8 1x128 operand as the Gluon kernel reads a prepared MXFP8 one: its scales
    K-step-major in each step's first chunk row, every flag one (one chain a step, the scale
    applied once per 128, as cuBLASLt's blockwise GEMM does)."""
    rows, k = q.data.shape
    steps, padded = -(-k // 128), -(-rows // pad) * pad
    s = torch.zeros(4 * steps, padded, dtype=torch.float32, device=q.data.device)
    s[0::4, :rows] = q.scale.float().t()
    u = torch.ones(-(-padded // rows_block), steps, dtype=torch.int32, device=q.data.device)
    return SimpleNamespace(data=q.data), s, u


def _rel_err(y, qa, qb) -> float:
    rows = min(512, qa.rows)
    qs = replace(qa, data=qa.data[:rows], scale=qa.scale[:rows], shape=torch.Size((rows, qa.cols)))
    ref = scaled_mm_reference(qs, qb)
    return ((y[:rows].float() - ref).norm() / ref.norm()).item()


def run(m, n, k, data, g) -> list[dict]:
    a_hp, b_hp = _operands(m, n, k, data, g)
    flop = 2.0 * m * n * k
    ref = {"backend": "reference"}
    qa, qb = ms.quantize(a_hp, "mxfp8_e4m3", **ref), ms.quantize(b_hp, "mxfp8_e4m3", **ref)
    bf16 = torch.bfloat16
    prep_a, prep_b = _prepared(qa, qb, data)
    one_chain = (prep_a[2][:, None, :] & prep_b[2][None, :, :]).float()   # per block pair, step
    fa, fb = ms.quantize(a_hp, "fp8_block", block=(1, 128), **ref), \
        ms.quantize(b_hp, "fp8_block", block=(128, 128), **ref)
    fb1 = ms.quantize(b_hp, "fp8_block", block=(1, 128), **ref)
    bw_a, bw_b = _blockwise_prepared(fa, 64, 128), _blockwise_prepared(fb1, 128, 128)
    fns = {
        "bf16": lambda: a_hp @ b_hp.t(),
        "wgmma": lambda: gemm_mxfp8_wgmma.scaled_mm_mxfp8_wgmma(qa, qb, bf16),
        "wgmma kernel": lambda: gemm_mxfp8_wgmma.launch(prep_a, prep_b, bf16),
        "prepare A+B": lambda: (gemm_mxfp8.prepare_mx_wgmma(qa, 64),
                                gemm_mxfp8.prepare_mx_wgmma(qb, 128)),
        "tl kernel": lambda: gemm_mxfp8.scaled_mm_mxfp8_fp8(qa, qb, bf16),
        "dequant+cuBLAS": lambda: gemm_fp4.scaled_mm_mxfp8(qa, qb, out_dtype=bf16,
                                                           strategy="dequant"),
        "fp8_block 1x128² cuBLASLt": lambda: gemm_fp8.scaled_mm_fp8(fa, fb1, out_dtype=bf16,
                                                                   path="torch"),
        "fp8_block 1x128² wgmma": lambda: gemm_mxfp8_wgmma.launch(bw_a, bw_b, bf16),
        "fp8_block cuBLASLt": lambda: gemm_fp8.scaled_mm_fp8(fa, fb, out_dtype=bf16,
                                                            path="torch"),
    }
    rows, t_bf16 = [], None
    if data in ("uniform", "perchunk"):    # the flags are forced: the kernel's timing only
        fns = {k: v for k, v in fns.items() if k == "bf16" or k.startswith("wgmma kernel")}
    for name, fn in fns.items():
        row = {"shape": f"{m}x{n}x{k}", "data": data, "variant": name}
        try:
            y = fn()
            t = _time(fn)
            t_bf16 = t if name == "bf16" else t_bf16
            row.update(ms=t, tflops=flop / t / 1e9, ratio=t_bf16 / t)
            if name in ("wgmma", "tl kernel", "dequant+cuBLAS"):
                row["rel_err"] = _rel_err(y, qa, qb)
            elif name.startswith("fp8_block 1x128²"):
                row["rel_err"] = _rel_err(y, fa, fb1)
            if name.startswith("wgmma"):
                row["one_chain"] = one_chain.mean().item()
        except Exception as err:  # noqa: BLE001 -- a row reports its failure and goes on
            row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"
        rows.append(row)
    return rows


def _ncu_target(m, n, k, data, g) -> None:
    a_hp, b_hp = _operands(m, n, k, data, g)
    ref = {"backend": "reference"}
    prep_a, prep_b = _prepared(ms.quantize(a_hp, "mxfp8_e4m3", **ref),
                               ms.quantize(b_hp, "mxfp8_e4m3", **ref), data)
    for _ in range(2):                   # the first launch compiles
        gemm_mxfp8_wgmma.launch(prep_a, prep_b, torch.bfloat16)
    torch.cuda.synchronize()


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default="", help="MxNxK,... (default: 8192^3 and LLaMA shapes)")
    p.add_argument("--data", default="gaussian,outliers")
    p.add_argument("--ncu-target", action="store_true",
                   help="run the kernel once per --data kind at the first shape (for ncu -k "
                        "regex:mxfp8_wgmma), no timing")
    args = p.parse_args(argv)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",") if s] or SHAPES
    g = torch.Generator(device="cuda").manual_seed(0)
    if args.ncu_target:
        for data in args.data.split(","):
            _ncu_target(*shapes[0], data, g)
        return
    print(common.env_header())
    rows = []
    for m, n, k in shapes:
        for data in args.data.split(","):
            rows += run(m, n, k, data, g)
            mine = [r for r in rows if r["shape"] == f"{m}x{n}x{k}" and r["data"] == data]
            print(common.fmt_table(mine, ["shape", "data", "variant", "ms", "tflops", "ratio",
                                          "rel_err", "one_chain", "error"]), flush=True)
    common.json_line({"bench": "mxfp8_wgmma", "env": common.env_info(), "rows": rows})


if __name__ == "__main__":
    main()
