"""The kernels' host side: argument checks, output buffers, launch grids, per-device caches.

What every kernel wrapper does on the host before its launch, kept out of the hot path's way:
a step that is not replayed as one CUDA graph pays this Python on every op call (see
``benchmarks/bench_host_stub.py`` and ``tests/test_host_cost.py``). So checks read shapes and
never build tensors to inspect them (a view's transpose only to raise the reference's error),
what does not change between calls is made once per device (the RHT matrix, the SM count, the
compute capability, placeholders for buffers a launch ignores), and host arithmetic is plain
Python (``cdiv``; ``triton.cdiv`` is a constexpr function in recent Triton, several µs a call).

Tensors cached here are made on a helper thread on CUDA: allocations of the calling thread may
be routed to a CUDA-graph memory pool while Inductor warms its graphs up
(``torch.compile(mode="reduce-overhead")``), and a cached tensor living there would be
overwritten by a later replay (Inductor also refuses pools with untracked live tensors).
Other threads' allocations are never routed, so such tensors land in ordinary memory.
"""

from __future__ import annotations

import os
import threading

import torch

from ..backend import KernelUnsupported
from ..hadamard import rht_matrix
from ..quant.common import SUPPORTED_DTYPES, check_input, draw_seed
from ..validate import check_input_meta

__all__ = ["IN_DTYPE_CODE", "cdiv", "check_kernel_input", "check_rand_bits", "check_views",
           "device_capability", "gemm_out", "interpreting", "kernel_seed", "multiprocessors",
           "persistent_grid", "placeholder", "rht_matrix_on"]

IN_DTYPE_CODE = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def check_kernel_input(x: torch.Tensor) -> None:
    """Reject what the kernels do not take: odd device, dtype or strides."""
    if x.device.type == "cpu" and not interpreting():
        raise KernelUnsupported("a CPU tensor needs TRITON_INTERPRET=1")
    if x.device.type not in ("cpu", "cuda"):
        raise KernelUnsupported(f"device {x.device} is not supported")
    if x.dtype not in SUPPORTED_DTYPES:
        raise KernelUnsupported(f"dtype {x.dtype}")
    if not x.is_contiguous():
        raise KernelUnsupported("input is not contiguous (row-major strides needed)")
    if x.numel() >= 2**31:
        raise KernelUnsupported("tensors of 2^31 elements or more (int32 indexing)")


def check_views(x2: torch.Tensor, row, col, block_of) -> None:
    """Validate both views as ``ops.rowcol_reference`` would (same errors, same order).

    ``block_of(fmt, opts) -> (block_cols, block_rows)``. The finite check runs once. The
    column view is x2ᵀ; its transpose is built only to raise the reference's error (a view
    that passes needs only its shape: no tensor op per call).
    """
    checked = False
    for view, transposed in ((row, False), (col, True)):
        if view is None:
            continue
        fmt, opts = view
        want = bool(opts.get("check_finite", True)) and not checked
        bc, br = block_of(fmt, opts)
        rows, cols = (x2.shape[1], x2.shape[0]) if transposed else x2.shape
        if want:
            check_input(x2.t() if transposed else x2, fmt.value, bc, br, True)
        elif not transposed:
            check_input_meta(x2, fmt.value, bc, br)
        elif cols % bc or rows % br or not x2.numel() or x2.dtype not in SUPPORTED_DTYPES:
            check_input_meta(x2.t(), fmt.value, bc, br)           # raises the reference's error
        checked = checked or want


def take_prologue(x2: torch.Tensor, prologue, fused: bool):
    """``(x2, prologue)`` for a kernel given a ``prologue`` hint ``(name, y)``
    (``op_specs.PROLOGUES``; None passes through): where the kernel applies the op as it loads
    (``fused``), the hint with y shaped like x2; otherwise ``op(x2, y)`` computed first, with
    the same bits, and no prologue."""
    if prologue is None:
        return x2, None
    from ..op_specs import apply_prologue
    y = None if prologue[1] is None else prologue[1].reshape(x2.shape).contiguous()
    return (x2, (prologue[0], y)) if fused else (apply_prologue(prologue[0], x2, y), None)


def check_rand_bits(bits: torch.Tensor | None, numel: int, device) -> torch.Tensor | None:
    """Validate caller-given SR bytes: uint8, one per element, on x's device."""
    if bits is None:
        return None
    if bits.dtype != torch.uint8 or bits.numel() != numel or bits.device != device:
        raise KernelUnsupported(f"rand_bits must be uint8 with {numel} elements on {device}, "
                                f"got {bits.dtype} with {bits.numel()} on {bits.device}")
    return bits.contiguous()


def kernel_seed(opts: dict, device: torch.device) -> torch.Tensor:
    """int32 ``[1]`` Philox seed for in-kernel SR: the caller's ``seed`` tensor, else one drawn
    from its ``generator`` (``quant.common.draw_seed``). It stays on the device: no host sync."""
    seed = opts.get("seed")
    if seed is None:
        seed = draw_seed(opts.get("generator"), device)
    return seed.to(device=device, dtype=torch.int32).reshape(1)


_M_CACHE: dict = {}
_SM_CACHE: dict = {}
_PLACEHOLDERS: dict = {}


def _off_thread(make):
    """``make()`` run on a helper thread, whose allocations no CUDA-graph pool takes (module
    docstring)."""
    box = []
    worker = threading.Thread(target=lambda: box.append(make()))
    worker.start()
    worker.join()
    return box[0]


def placeholder(dtype: torch.dtype, device: torch.device, numel: int = 8) -> torch.Tensor:
    """A small tensor passed for a kernel argument that the launch never reads or writes (the
    buffers of a view not asked for): one per dtype, size and device, made once, instead of
    fresh allocations on every call. Inside a CUDA-graph capture a first request gets a fresh
    tensor, not cached (the graph's pool owns it)."""
    key = (dtype, str(device), numel)
    t = _PLACEHOLDERS.get(key)
    if t is None:
        make = lambda: torch.empty(numel, dtype=dtype, device=device)      # noqa: E731
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            return make()                  # never cache a tensor made inside a capture
        t = _off_thread(make) if device.type == "cuda" else make()
        _PLACEHOLDERS[key] = t
    return t


def rht_matrix_on(d: int, device: torch.device) -> torch.Tensor:
    """``hadamard.rht_matrix(d)`` cached per device (no host-to-device copy per call), made on
    a helper thread on CUDA (module docstring). It cannot be made while a graph is being
    captured (a host-to-device copy): warm up first, as every capture must."""
    key = (d, str(device))
    if key not in _M_CACHE:
        if device.type != "cuda":
            _M_CACHE[key] = rht_matrix(d, device).contiguous()
        elif torch.cuda.is_current_stream_capturing():
            raise RuntimeError(f"the {d}-point RHT matrix is not yet on {device}: run the "
                               "quantizer once before capturing a CUDA graph (a warm-up step)")
        else:
            _M_CACHE[key] = _off_thread(lambda: rht_matrix(d, device).contiguous())
    return _M_CACHE[key]


_CC_CACHE: dict[str, tuple[int, int]] = {}


def device_capability(device: torch.device) -> tuple[int, int]:
    """``torch.cuda.get_device_capability``, cached per device (asked on every GEMM call)."""
    key = str(device)
    if key not in _CC_CACHE:
        _CC_CACHE[key] = torch.cuda.get_device_capability(device)
    return _CC_CACHE[key]


def multiprocessors(device: torch.device) -> int:
    """The device's SM count, cached per device."""
    key = str(device)
    if key not in _SM_CACHE:
        _SM_CACHE[key] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SM_CACHE[key]


def gemm_out(y: torch.Tensor, qa, qb) -> torch.Tensor:
    """A GEMM result ``[rows_a, rows_b]`` shaped like A's leading dims (itself when it already
    is: no view op per call for the 2-D operands the layers pass)."""
    shape = (*qa.shape[:-1], qb.rows)
    return y if y.shape == shape else y.reshape(shape)


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` for the host side's non-negative ints (``triton.cdiv`` is a constexpr
    function in recent Triton: several µs a call, and a launch plan makes a few of them)."""
    return -(-a // b)


def persistent_grid(n_tiles: int, device: torch.device, progs_per_sm: int) -> int:
    """Programs to launch: at most ``progs_per_sm`` per multiprocessor, each looping over tiles."""
    if device.type != "cuda":
        return max(1, min(n_tiles, 2))          # the interpreter: exercise the tile loop
    return max(1, min(n_tiles, multiprocessors(device) * progs_per_sm))
