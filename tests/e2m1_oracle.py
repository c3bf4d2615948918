"""Scalar numpy oracle for E2M1 rounding, shared by the NVFP4 and MX quantizer tests.

Written from SPEC §1 and §5 alone, independent of the library: RNE is a direct search for the
nearest grid value (ties to the even magnitude code), SR follows the Blackwell instruction in
numpy float32 scalars (``np.float32`` arithmetic is IEEE fp32 RNE).
"""

from __future__ import annotations

import numpy as np

F32 = np.float32
GRID = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=F32)


def e2m1_nearest(y: np.float32) -> int:
    """Nearest grid value to |y| (ties: even code); sign bit from y (so -0 gives code 8)."""
    dist = np.abs(GRID - abs(y))
    best = [c for c in range(8) if dist[c] == dist.min()]
    mag = best[0] if len(best) == 1 else next(c for c in best if c % 2 == 0)
    return (8 if np.signbit(y) else 0) | mag


def e2m1_sr(y: np.float32, r: int) -> int:
    """SPEC §5 stochastic rounding of y (already clamped to ±6) with random byte r, in fp32."""
    def step(v):
        return F32(0.5) if v < 2 else (F32(1) if v < 4 else F32(2))
    a = F32(abs(y))
    u = F32(r) / F32(256)
    t = F32(a + F32(u * step(a)))
    q = min(F32(np.floor(F32(t / step(t))) * step(t)), F32(6))
    return (8 if np.signbit(y) else 0) | int(np.flatnonzero(GRID == q)[0])
