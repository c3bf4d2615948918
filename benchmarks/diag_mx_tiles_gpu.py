"""Which outputs of the MXFP8 register pair kernel differ from the reference, per tile config
(``quant_mx.CONFIG`` BR_reg / num_warps_reg / PROGS_PER_SM_reg), on one GPU: session 21's
sweep found the x pair (row view expanded, column view as codes) at [64, 128] tiles with 2
warps not bit-identical. Prints mismatch counts and the first positions per output; the
refusal of that config is bypassed here (the kernel is launched directly).

    python benchmarks/diag_mx_tiles_gpu.py
"""

from __future__ import annotations

import torch

import microscale as ms
from microscale.kernels import quant_mx
from microscale.kernels._utils import persistent_grid
from microscale.kernels.quant_rowcol_reg import mx8_rowcol_reg_kernel
from microscale.ops import quantize_views
from microscale.tensor import QFormat


def _launch(x, br, warps, progs, row_exp):
    rows, cols = x.shape
    dev = x.device
    qr = torch.empty(rows, cols, dtype=torch.bfloat16 if row_exp else torch.uint8, device=dev)
    sr = torch.empty(rows, cols // 32, dtype=torch.uint8, device=dev)
    qc = torch.empty(cols, rows, dtype=torch.uint8, device=dev)
    sc = torch.empty(cols, rows // 32, dtype=torch.uint8, device=dev)
    amax = torch.zeros(2, dtype=torch.float32, device=dev)
    n_tc, n_tiles = cols // 128, (rows // br) * (cols // 128)
    grid = (persistent_grid(n_tiles, dev, progs),)
    mx8_rowcol_reg_kernel[grid](x, amax, qr, sr, qc, sc, rows, cols, n_tc, n_tiles, 0, True, 0,
                                True, False, 1, row_exp, False, True, br, num_warps=warps)
    return qr, sr, qc, sc


def main() -> None:
    dev = torch.device("cuda")
    x = torch.randn(16384, 3072, device=dev, dtype=torch.bfloat16)
    e4 = QFormat.MXFP8_E4M3
    nf = {"check_finite": False}
    quant_mx.CONFIG.update(BR_reg=128, num_warps_reg=4, PROGS_PER_SM_reg=2)
    want = quantize_views(x, (e4, {**nf, "expand": True}), (e4, nf), "triton")
    ref = ms.quantize_rowcol(x, ("mxfp8_e4m3", nf), ("mxfp8_e4m3", nf), backend="reference")
    print("default vs reference codes:", torch.equal(ref[1].data.view(torch.uint8),
                                                      want[1].data.view(torch.uint8)))
    outs = {"row_exp": want[0].data.view(torch.int16), "row_scale": want[0].scale.view(torch.uint8),
            "col_codes": want[1].data.view(torch.uint8), "col_scale": want[1].scale.view(torch.uint8)}
    for br, warps, progs in [(128, 4, 2), (64, 4, 3), (64, 2, 4), (64, 2, 6), (32, 2, 6),
                             (32, 1, 8)]:
        for rep in range(2):
            got = _launch(x, br, warps, progs, True)
            line = []
            for (name, w), g in zip(outs.items(), got):
                g = g.view(w.dtype).reshape(w.shape)
                bad = (g != w).nonzero()
                line.append(f"{name} {bad.shape[0]}" + (f" first {bad[:3].tolist()}"
                                                        if bad.shape[0] else ""))
            print(f"BR {br} warps {warps} progs {progs} run {rep}: " + "; ".join(line),
                  flush=True)


if __name__ == "__main__":
    main()
