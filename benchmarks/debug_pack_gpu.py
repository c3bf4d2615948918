"""Session 41, call 2: the RNE code words packed from the grid bits, piece by piece, on the GPU
(a small kernel: the grid bits, the codes, the packed words), and the ptxas Triton uses.
    python3 benchmarks/debug_pack_gpu.py
"""
import subprocess
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, "src")
from microscale.kernels._e2m1 import (pack_e2m1_nibbles, scaled_e2m1_code_fast,  # noqa: E402
                                      scaled_e2m1_grid_bits)

@triton.jit
def k(y_ptr, out_ptr, g_ptr, c_ptr, BLOCK: tl.constexpr):
    w = tl.arange(0, BLOCK)
    gs = ()
    ys = ()
    for i in tl.static_range(8):
        y = tl.load(y_ptr + 8 * w + i)
        g = scaled_e2m1_grid_bits(y, 1.0, 0, False)
        tl.store(g_ptr + 8 * w + i, g)
        tl.store(c_ptr + 8 * w + i, scaled_e2m1_code_fast(y, 1.0, 0, False))
        gs = gs + (g,)
        ys = ys + (y,)
    word = pack_e2m1_nibbles(gs, ys, 0)
    tl.store(out_ptr + w, word.to(tl.int32, bitcast=True))

y = torch.tensor([[0.5, 1, 1.5, 2, 3, 4, 6, 2.0], [-0.5, -1, -1.5, -2, -3, -4, -6, -2.0],
                  [6, 6, 6, 6, 6, 6, 6, 6], [1, 1, 1, 1, 1, 1, 1, 6]] * 8, device="cuda")
out = torch.zeros(32, dtype=torch.int32, device="cuda")
g = torch.zeros(256, dtype=torch.int32, device="cuda"); c = torch.zeros_like(g)
kern = k[(1,)](y, out, g, c, 32)
print([hex(v & 0xFFFFFFFF) for v in out[:4].tolist()])
print([hex(v) for v in g[:32].tolist()])
print(c[:32].tolist())
sass = kern.asm.get("sass", "")
print("\n".join(line for line in sass.splitlines()
                if any(s in line for s in ("IMAD", "LEA", "SHF", "LOP3", "FMUL")))[-3000:])
from triton.backends.nvidia import compiler as c_  # noqa: E402
ptxas = c_.get_ptxas("sm_90a").path
print(ptxas, subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout)
