"""Persistent launches sized to what fits on the GPU at once.

A persistent kernel launches a fixed number of programs, each looping over tiles
``pid, pid + grid, pid + 2·grid, …``; every program gets the same share of tiles. That share
only runs concurrently if every program is resident at once. A multiprocessor holds as many
programs (CTAs) as its registers, shared memory and warp slots allow:

* registers: each warp takes ``ceil(n_regs · 32 / 256) · 256`` of the SM's 65,536;
* shared memory: each CTA takes its static + dynamic bytes plus 1 KiB the driver reserves;
* warps: at most 64 per SM (2,048 threads); CTAs: at most 32.

Launch ``progs_per_sm`` programs per SM where fewer fit and the rest run as a second, partly
empty wave: Nsight Compute on an H100 showed the NVFP4 amax pass (152 registers, 4 per SM
asked, 3 fit) at 1.33 waves and the SR rows pass (78 registers, 16 asked, 6 fit) at 2.67.
:func:`launch_persistent` therefore compiles once, reads the kernel's register and shared
memory use, and from then on launches ``min(progs_per_sm, fit)`` programs per SM: one full
wave. The first launch of a new signature still uses ``progs_per_sm`` (Triton compiles inside
that launch); results never depend on the grid (tiles are keyed by position, amaxes reduced
with atomics), only the time does.

``FIT["on"]`` (env ``MICROSCALE_FIT_GRID=0`` turns it off) is the switch for A/B timings.
"""

from __future__ import annotations

import os

import torch

from ._host import persistent_grid

__all__ = ["FIT", "launch_persistent", "resident_programs"]

FIT = {"on": os.environ.get("MICROSCALE_FIT_GRID", "1") != "0"}
_RESIDENT: dict = {}          # launch signature -> programs that fit on one SM
_PROPS: dict = {}             # device index -> (registers, shared bytes, threads) per SM


def _sm_limits(device: torch.device) -> tuple[int, int, int]:
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _PROPS:
        p = torch.cuda.get_device_properties(idx)
        _PROPS[idx] = (getattr(p, "regs_per_multiprocessor", 65536),
                       getattr(p, "shared_memory_per_multiprocessor", 232448),
                       getattr(p, "max_threads_per_multi_processor", 2048))
    return _PROPS[idx]


def resident_programs(n_regs: int, shared: int, num_warps: int, limits: tuple[int, int, int]
                      ) -> int:
    """Programs of ``num_warps`` warps using ``n_regs`` registers a thread and ``shared`` bytes
    that one SM with ``limits`` (registers, shared bytes, threads) holds at once (at least 1)."""
    regs_sm, smem_sm, threads_sm = limits
    per_warp = -(-max(n_regs, 1) * 32 // 256) * 256
    by_regs = regs_sm // per_warp // num_warps
    by_smem = smem_sm // (shared + 1024) if shared else 32
    by_warps = threads_sm // (32 * num_warps)
    return max(1, min(by_regs, by_smem, by_warps, 32))


def _signature(kernel, device: torch.device, args: tuple, opts: dict) -> tuple:
    return (kernel, device.index, tuple(a.dtype if isinstance(a, torch.Tensor) else a
                                        for a in args), tuple(sorted(opts.items())))


def launch_persistent(kernel, n_tiles: int, device: torch.device, progs_per_sm: int,
                      args: tuple, **opts) -> None:
    """``kernel[(grid,)](*args, **opts)`` with ``grid`` at most ``progs_per_sm`` programs per
    SM and, once the kernel's resources are known, no more than fit at once (module docstring)."""
    if device.type != "cuda" or not FIT["on"]:
        kernel[(persistent_grid(n_tiles, device, progs_per_sm),)](*args, **opts)
        return
    key = _signature(kernel, device, args, opts)
    fit = _RESIDENT.get(key)
    progs = progs_per_sm if fit is None else min(progs_per_sm, fit)
    compiled = kernel[(persistent_grid(n_tiles, device, progs),)](*args, **opts)
    if fit is None and compiled is not None:
        n_regs = getattr(compiled, "n_regs", None)
        if n_regs is None:                       # handles not loaded yet: nothing to read
            return
        shared = getattr(getattr(compiled, "metadata", None), "shared", 0) or 0
        _RESIDENT[key] = resident_programs(n_regs, shared, opts.get("num_warps", 4),
                                           _sm_limits(device))
