"""A persistent kernel's amax without a zeroed buffer: the last program to finish reduces.

Before (sessions 6-46) a pair kernel's caller allocated a zeroed fp32 amax (one fill launch per
call) and every program raised it with ``atomic_max``. Those fills were ~340 launches of a 1b
training step with FP8 blockwise or MXFP8 pairs, ~200 at 125m: a ~0.9 µs kernel and a ~1.2 µs
gap each in a replayed CUDA graph (session 47's replay profile).

Now each program stores its own maximum ``m`` in ``parts[pid]`` (an uninitialised buffer of
one float per program) and takes a ticket from a counter (``atomic_add``, acquire-release at GPU
scope, after a barrier so that the program's store precedes it). The program that draws ticket
``n - 1`` knows every other program has stored its maximum (their tickets' releases are ordered
before its acquire), reduces ``parts`` (read through L2), writes the amax to its ``SLOTS``
outputs, and sets the counter back to 0. Max is exact in any order, and the partials are never
NaN (the kernels' maxima drop it, as the reference's NaN → 0 does) nor negative, so the result is
bit for bit what ``atomic_max`` from 0 gave.

The counter is zero whenever no kernel that uses it is running, so it is zeroed once: a block of
``_SLOTS`` int32 counters per device, made on a helper thread outside any CUDA-graph capture
(``_host``'s rule for cached tensors), and one counter per stream, in the order streams first
ask. Kernels of one stream run one after the other; two streams never share a counter, so
kernels running concurrently (an FSDP all-gather stream beside the compute stream) cannot mix
tickets. What falls back to the zeroed buffer and ``atomic_max`` (same bits, one fill more):
a first call inside a capture on a device that has no block yet, and streams past the
``_SLOTS``-th. A graph replays with the counter of the stream it was captured on: two graphs
captured on one stream and replayed at the same time on two others would share it (not done
by torch.cuda.graph or Inductor's CUDA-graph trees, which capture on their own streams and
replay one graph at a time).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._host import _off_thread

__all__ = ["amax_buffers", "store_amax_last", "CONFIG"]

# LAST_PROGRAM: False restores the zeroed buffer + atomic_max (the A/B of session 47)
CONFIG = {"LAST_PROGRAM": True}
_SLOTS = 64
_BLOCKS: dict[str, torch.Tensor] = {}
_STREAM_SLOT: dict[tuple[str, int], int] = {}


def _stream_key(device: torch.device) -> tuple[str, int]:
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    return str(device), stream


def _counter(device: torch.device) -> torch.Tensor | None:
    """The calling stream's counter on ``device``, or None (the fallback, module docstring)."""
    key = _stream_key(device)
    block = _BLOCKS.get(key[0])
    if block is None:
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            return None
        block = _off_thread(lambda: _zeroed(device)) if device.type == "cuda" else _zeroed(device)
        _BLOCKS[key[0]] = block
    slot = _STREAM_SLOT.get(key)
    if slot is None:
        slot = sum(1 for k in _STREAM_SLOT if k[0] == key[0])
        if slot >= _SLOTS:
            return None
        _STREAM_SLOT[key] = slot
    return block[slot:slot + 1]


def _zeroed(device: torch.device) -> torch.Tensor:
    block = torch.zeros(_SLOTS, dtype=torch.int32, device=device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)       # zero before any stream of the caller uses it
    return block


def amax_buffers(device: torch.device, programs: int, slots: int = 1):
    """``(amax, parts, counter, last)`` for a launch of ``programs`` programs: ``amax`` the
    kernel's output (``slots`` == 1: a 0-d tensor, else ``[slots]``), uninitialised where the
    last program writes it (``last`` True), else zeroed for ``atomic_max`` (``parts`` and
    ``counter`` then ``amax`` itself, unused)."""
    shape = () if slots == 1 else (slots,)
    counter = _counter(device) if CONFIG["LAST_PROGRAM"] else None
    if counter is None:
        amax = torch.zeros(shape, dtype=torch.float32, device=device)
        return amax, amax, amax, False
    amax = torch.empty(shape, dtype=torch.float32, device=device)
    parts = torch.empty(programs, dtype=torch.float32, device=device)
    return amax, parts, counter, True


def parts_width(programs: int) -> int:
    """The kernels' ``NP`` (a power of two ≥ ``programs``; 1024 covers 132 SMs x 4 programs
    and more, so one compiled variant serves every grid up to it)."""
    return max(1024, triton.next_power_of_2(programs))


@triton.jit
def store_amax_last(amax_ptr, parts_ptr, count_ptr, m, LAST: tl.constexpr, SLOTS: tl.constexpr,
                    NP: tl.constexpr):
    """This program's maximum ``m`` (≥ 0, never NaN) into the launch's amax: by the last
    program to finish (``LAST``, module docstring) or by ``atomic_max`` into a zeroed buffer.
    ``SLOTS``: the number of amax outputs, each written with the same value."""
    if LAST:
        pid = tl.program_id(0)
        n = tl.num_programs(0)
        tl.store(parts_ptr + pid, m)
        tl.debug_barrier()                   # every thread's store before the ticket
        ticket = tl.atomic_add(count_ptr, 1, sem="acq_rel", scope="gpu")
        if ticket == n - 1:
            offs = tl.arange(0, NP)
            parts = tl.load(parts_ptr + offs, mask=offs < n, other=0.0, cache_modifier=".cg")
            amax = tl.max(parts, axis=0)
            for s in tl.static_range(SLOTS):
                tl.store(amax_ptr + s, amax)
            tl.atomic_xchg(count_ptr, 0, sem="relaxed", scope="gpu")
    else:
        for s in tl.static_range(SLOTS):
            tl.atomic_max(amax_ptr + s, m)
