"""DeepGEMM's FP8 blockwise GEMMs beside cuBLASLt's (the fp8_blockwise path today) and bf16.

DeepGEMM (github.com/deepseek-ai/DeepGEMM, MIT) is DeepSeek's JIT-compiled FP8 GEMM library
for Hopper: ``fp8_gemm_nt`` with 1×128 · 128×128 scales (``recipe (1, 128, 128)``, "1d2d":
fprop and dgrad) and 1×128 · 1×128 (``(1, 1, 128)``, "1d1d": wgrad, fp32 out), the same
products as ``gemm.scaled_mm_reference`` up to summation order, which is what our cuBLASLt
path runs (``kernels/gemm_fp8``). This measures, at the training shapes, whether it is faster:

* every GEMM of one 1b block (16384 tokens; q/o 2048→2048, k/v 2048→512, up 2048→8192, down
  8192→2048), issue 12's layer (16384 tokens, 4096→14336), one 125m block (768 wide, k/v
  256, MLP 3072; session 49) and one 50m block (640 wide, k/v 128, MLP 2560; session 49),
  each as fprop ``x Wᵀ``, dgrad ``dy W`` and wgrad ``dyᵀ x`` (``--layers 50m,125m``: some);
* operands quantized by microscale (``ms.quantize``, ``fp8_block``), graph-replayed times
  (``common.graph_ms``), TFLOP/s, the ratio to cuBLASLt and to a bf16 ``torch.mm``, and
  ``best_x_bf16``: the faster library's (what the timed choice of ``gemm_deepgemm`` takes)
  against bf16 (issue 12, item 5: FP8 blockwise GEMM ≥ 1.0× bf16 at the 50m/125m shapes);
* agreement: the relative Frobenius difference from cuBLASLt's output and from the fp32
  reference on a 512-row slice.

DeepGEMM is not a dependency: build it from its source (with CUTLASS and fmt headers) and put
it on ``PYTHONPATH``; ``tools/build_deepgemm.py`` builds it
(``benchmarks/sessions/run_session49e_gpu.sh`` on the GPU machine). Prints a table and ends
with one JSON line (``--out``: also to a file).

    python benchmarks/bench_deepgemm.py [--tokens 16384] [--layers 50m,125m] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

import microscale as ms
from microscale.kernels.gemm_fp8 import scaled_mm_fp8

import common
from bench_gemm import _rel_err as ref_slice_err   # vs the fp32 reference on 512 rows

# (name, in, out) of the linears timed; the 1b block's and issue 12's layer
LAYERS = [("1b q/o", 2048, 2048), ("1b k/v", 2048, 512), ("1b up", 2048, 8192),
          ("1b down", 8192, 2048), ("issue12 layer", 4096, 14336),
          ("125m q/o", 768, 768), ("125m k/v", 768, 256), ("125m up", 768, 3072),
          ("125m down", 3072, 768),
          ("50m q/o", 640, 640), ("50m k/v", 640, 128), ("50m up", 640, 2560),
          ("50m down", 2560, 640)]


def operands(role: str, t: int, n_in: int, n_out: int, device) -> tuple:
    """(A, B, recipe, out dtype) of one GEMM ``A Bᵀ`` as the layer's quantizers make them."""
    g = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(t, n_in, device=device, generator=g, dtype=torch.bfloat16)
    w = torch.randn(n_out, n_in, device=device, generator=g, dtype=torch.bfloat16) * 0.02
    dy = torch.randn(t, n_out, device=device, generator=g, dtype=torch.bfloat16) * 1e-3
    row, tile = {"block": (1, 128)}, {"block": (128, 128)}
    if role == "fprop":
        return (ms.quantize(x, "fp8_block", **row), ms.quantize(w, "fp8_block", **tile),
                (1, 128, 128), torch.bfloat16)
    if role == "dgrad":
        return (ms.quantize(dy, "fp8_block", **row),
                ms.quantize(w.t().contiguous(), "fp8_block", **tile), (1, 128, 128),
                torch.bfloat16)
    return (ms.quantize(dy.t().contiguous(), "fp8_block", **row),
            ms.quantize(x.t().contiguous(), "fp8_block", **row), (1, 1, 128), torch.float32)


def rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    return ((y.float() - ref.float()).norm() / ref.float().norm()).item()


def run_one(dg, name: str, role: str, t: int, n_in: int, n_out: int, device,
            warm: bool = False) -> dict:
    qa, qb, recipe, out_dtype = operands(role, t, n_in, n_out, device)
    m, n, k = qa.rows, qb.rows, qa.cols
    row = {"layer": name, "role": role, "m": m, "n": n, "k": k}
    d = torch.empty(m, n, device=device, dtype=out_dtype)
    # the scale layouts DeepGEMM reads on sm_90 (made here, untimed, as a quantizer could
    # write them): 1×128 scales MN-major ([rows, K/128] column-major; rows % 4 == 0 is
    # TMA-aligned), 128×128 scales contiguous
    sa = qa.scale.t().contiguous().t()
    sb = qb.scale.t().contiguous().t() if qb.block[0] == 1 else qb.scale.contiguous()

    def deep():
        if recipe[1] == 1:          # 1d1d (wgrad) accumulates, D = C + A Bᵀ: from zeros here
            d.zero_()
            dg.fp8_gemm_nt((qa.data, sa), (qb.data, sb), d, c=d, recipe=recipe)
        else:
            dg.fp8_gemm_nt((qa.data, sa), (qb.data, sb), d, recipe=recipe)

    t0 = time.perf_counter()
    try:
        deep()
        torch.cuda.synchronize()
    except Exception as err:                       # report, keep going
        return {**row, "error": f"{type(err).__name__}: {err}"[:200]}
    row["first_call_s"] = time.perf_counter() - t0
    if warm:
        return row
    # path="torch": cuBLASLt itself (the default path, "auto", may hand the call to DeepGEMM:
    # session 49's calls 1 and 5 timed the dispatch's choice in this column by mistake)
    y_cublas = scaled_mm_fp8(qa, qb, out_dtype, path="torch")
    row["vs_cublas"] = rel_err(d, y_cublas)
    row["vs_ref"], row["cublas_vs_ref"] = ref_slice_err(d, qa, qb), ref_slice_err(y_cublas, qa, qb)
    a16 = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    b16 = torch.randn(n, k, device=device, dtype=torch.bfloat16)
    fns = {"deepgemm": deep, "cublaslt": lambda: scaled_mm_fp8(qa, qb, out_dtype, path="torch"),
           "bf16": lambda: torch.mm(a16, b16.t())}
    times = {}
    for key, fn in fns.items():            # graph-replayed; eager (noted) where capture fails
        times[key] = common.graph_ms(fn)
        if times[key] is None:
            times[key], row[f"{key}_eager"] = common.bench_ms(fn), True
    flop = 2.0 * m * n * k
    for key, ms_ in times.items():
        row[f"{key}_us"] = None if ms_ is None else ms_ * 1e3
        row[f"{key}_tfs"] = None if ms_ is None else flop / ms_ / 1e9
    if times["deepgemm"] and times["cublaslt"]:
        row["dg_x_cublas"] = times["cublaslt"] / times["deepgemm"]
        row["dg_x_bf16"] = times["bf16"] / times["deepgemm"]
        row["cublas_x_bf16"] = times["bf16"] / times["cublaslt"]
        row["best_x_bf16"] = times["bf16"] / min(times["deepgemm"], times["cublaslt"])
    return row


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, default=16384)
    p.add_argument("--out", default=None)
    p.add_argument("--layers", default=None,
                   help="comma-separated prefixes of the layer names to run (e.g. 50m,125m)")
    p.add_argument("--only", default=None,
                   help="comma-separated indices of the GEMMs to run (after --layers)")
    p.add_argument("--warm", action="store_true",
                   help="call each GEMM once (JIT-compile it into DeepGEMM's cache), no timing")
    args = p.parse_args(argv)
    import deep_gemm as dg                              # built from source: see the docstring
    device = torch.device("cuda")
    print(common.env_header(), flush=True)
    prefixes = tuple(args.layers.split(",")) if args.layers else ("",)
    gemms = [(name, role, n_in, n_out) for name, n_in, n_out in LAYERS
             if name.startswith(prefixes) for role in ("fprop", "dgrad", "wgrad")]
    if args.only:
        gemms = [gemms[int(i)] for i in args.only.split(",")]
    rows = [run_one(dg, name, role, args.tokens, n_in, n_out, device, args.warm)
            for name, role, n_in, n_out in gemms]
    cols = ["layer", "role", "m", "n", "k", "deepgemm_us", "cublaslt_us", "bf16_us",
            "deepgemm_tfs", "cublaslt_tfs", "dg_x_cublas", "dg_x_bf16", "cublas_x_bf16",
            "best_x_bf16", "vs_cublas", "vs_ref", "cublas_vs_ref", "first_call_s", "error"]
    print(common.fmt_table(rows, cols), flush=True)
    payload = {"env": common.env_info(), "bench": "deepgemm", "argv": argv, "rows": rows,
               "deep_gemm": getattr(dg, "__version__", "?")}
    common.json_line(payload)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(payload, f, indent=1)


if __name__ == "__main__":
    main()
