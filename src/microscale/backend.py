"""Backend selection: one dispatch point between the reference ops and their Triton kernels.

Every op has a pure-PyTorch reference (the spec) and may have kernels registered under the
same name with the same signature. ``backend`` is:

* ``"reference"`` -- always the reference.
* ``"triton"``    -- the kernel; on a CPU tensor only under ``TRITON_INTERPRET=1`` (Triton's
  interpreter runs the same kernel code, which is how CI checks kernels bit-exactly).
* ``"auto"``      -- the kernel for CUDA tensors when Triton is importable and the kernel
  accepts the arguments, else the reference.

A kernel that cannot handle its arguments raises :class:`KernelUnsupported` with the reason:
``"auto"`` then falls back to the reference, ``"triton"`` re-raises it as a ``ValueError``.

No silent fallback: every call records the path it took per ``(op, key)`` (the kernel, the
library path inside it, e.g. cuBLASLt's blockwise FP8 GEMM, or the reference and why), and
:func:`explain` prints them. The first time a CUDA tensor falls back to the reference a
warning names the op, the key and the reason; in strict mode (:func:`set_strict` or
``MICROSCALE_STRICT=1``) it raises instead.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
from typing import Callable

import torch

from .validate import BACKENDS, check_backend

__all__ = ["BACKENDS", "KernelUnsupported", "register_kernel", "dispatch", "triton_available",
           "has_kernel", "note_path", "note_fallback", "set_strict", "explain", "PathReport",
           "rowcol_key", "mm_key", "wants_kernel", "kernel_takes_hint"]

log = logging.getLogger(__name__)
_KERNELS: dict[tuple[str, str], Callable] = {}
_loaded = False
_PATHS: dict[tuple[str, str], str] = {}           # (op, key) -> the path its last call took
_WARNED: set[tuple] = set()
_STRICT = [os.environ.get("MICROSCALE_STRICT", "0") == "1"]


class KernelUnsupported(Exception):
    """Raised by a kernel for arguments it cannot handle (shape, dtype, stride, option)."""


def register_kernel(op: str, key: str):
    """Decorator: register ``fn`` as the Triton implementation of ``(op, key)``."""
    def deco(fn):
        _KERNELS[(op, key)] = fn
        return fn
    return deco


_HAS_TRITON = importlib.util.find_spec("triton") is not None   # asked once, at import


def triton_available() -> bool:
    """Whether Triton is installed (looked up once, at import: traced code may call this,
    and Dynamo refuses to trace ``importlib``)."""
    return _HAS_TRITON


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _load_kernels() -> None:
    global _loaded
    if not _loaded and triton_available():
        try:
            importlib.import_module("microscale.kernels")
        except ModuleNotFoundError as err:  # only a missing kernels package is tolerated
            if err.name not in ("microscale.kernels",):
                raise
        _loaded = True


def rowcol_key(row_fmt: str | None, col_fmt: str | None) -> str:
    """The ``quantize_rowcol`` key of a (row view, column view) format pair, "none" for absent."""
    return f"{row_fmt or 'none'}|{col_fmt or 'none'}"


def mm_key(a_fmt: str, b_fmt: str) -> str:
    """The ``scaled_mm`` key of an operand format pair."""
    return f"{a_fmt}x{b_fmt}"


def has_kernel(op: str, key: str) -> bool:
    """Whether a kernel is registered for ``(op, key)`` (loading the kernels if needed)."""
    _load_kernels()
    return (op, key) in _KERNELS


def wants_kernel(backend: str, device: torch.device) -> bool:
    """Whether :func:`dispatch` looks for a kernel: ``backend='triton'``, or ``'auto'`` on CUDA."""
    return backend != "reference" and (backend == "triton" or device.type == "cuda")


def kernel_takes_hint(op: str, key: str, backend: str, device: torch.device, hint: str) -> bool:
    """Whether :func:`dispatch` of ``(op, key)`` would run a kernel that takes ``hint``."""
    if not wants_kernel(backend, device):
        return False
    _load_kernels()
    return hint in getattr(_KERNELS.get((op, key)), "hints", ())


def note_path(op: str, key: str, path: str) -> None:
    """Record the path a call took (kernels refine "triton" with their library path)."""
    _PATHS[(op, key)] = path


def note_fallback(op: str, key: str, path: str, why: str) -> None:
    """A kernel could not take its preferred path (e.g. Blackwell's native GEMM refused) and
    runs ``path`` instead: recorded and warned once; in strict mode this raises."""
    if _STRICT[0]:
        raise RuntimeError(f"microscale strict mode: {op}({key}) would fall back to {path}: {why}")
    if (op, key, "kernel") not in _WARNED:
        _WARNED.add((op, key, "kernel"))
        log.warning("%s(%s) falls back to %s: %s", op, key, path, why)
    _PATHS[(op, key)] = f"{path} (fallback: {why})"


def set_strict(on: bool = True) -> None:
    """Strict mode: a CUDA call that would fall back to the reference raises instead."""
    _STRICT[0] = bool(on)


def _fallback(op: str, key: str, why: str) -> None:
    if _STRICT[0]:
        raise RuntimeError(f"microscale strict mode: {op}({key}) on CUDA would fall back to the "
                           f"reference: {why}")
    if (op, key) not in _WARNED:
        _WARNED.add((op, key))
        log.warning("%s(%s) on CUDA runs the reference (slow): %s", op, key, why)
    _PATHS[(op, key)] = f"reference (fallback: {why})"


def dispatch(op: str, key: str, backend: str, device: torch.device,
             reference: Callable, *args, hints: dict | None = None, **kwargs):
    """Run ``op`` for ``key`` (a format name) on the chosen backend.

    ``hints``: optional keyword arguments that only a kernel declaring them (its ``hints``
    attribute, a tuple of names) receives; the reference and other kernels never see them, so
    the caller must check the result for what was done (e.g. ``expand``: which views came back
    expanded)."""
    check_backend(backend)
    if backend == "reference":
        _PATHS[(op, key)] = "reference (backend='reference')"
        return reference(*args, **kwargs)
    if wants_kernel(backend, device):
        _load_kernels()
    kernel = _KERNELS.get((op, key))
    if backend == "triton":
        if kernel is None:
            why = "Triton is not installed" if not triton_available() else "no kernel is registered"
            raise ValueError(f"backend='triton' for {op}({key}): {why}")
        if device.type == "cpu" and not _interpreting():
            raise ValueError(f"backend='triton' on a CPU tensor needs TRITON_INTERPRET=1 "
                             f"(set before importing triton) for {op}({key})")
        _PATHS[(op, key)] = "triton"
        try:
            return kernel(*args, **_with_hints(kernel, hints, kwargs))
        except KernelUnsupported as err:
            raise ValueError(f"backend='triton' cannot run {op}({key}): {err}") from None
    if device.type != "cuda":
        _PATHS[(op, key)] = f"reference ({device.type} tensor)"
        return reference(*args, **kwargs)
    if kernel is None:
        _fallback(op, key, "Triton is not installed" if not triton_available()
                  else "no kernel is registered for this key")
        return reference(*args, **kwargs)
    _PATHS[(op, key)] = "triton"
    try:
        return kernel(*args, **_with_hints(kernel, hints, kwargs))
    except KernelUnsupported as err:
        _fallback(op, key, str(err))
    return reference(*args, **kwargs)


def _with_hints(kernel: Callable, hints: dict | None, kwargs: dict) -> dict:
    takes = getattr(kernel, "hints", ())
    return {**kwargs, **{k: v for k, v in (hints or {}).items() if k in takes}}


class PathReport(dict):
    """``{(op, key): path}`` with a readable ``str``; see :func:`explain`."""

    def __str__(self) -> str:
        if not self:
            return "microscale: no quantize/GEMM call has run yet"
        width = max(len(f"{op}({key})") for op, key in self)
        lines = ["microscale paths (the last call of each op and format):"]
        lines += [f"  {f'{op}({key})':<{width}}  {path}" for (op, key), path in sorted(self.items())]
        return "\n".join(lines)


def explain(model=None) -> PathReport:
    """Which path every quantize / GEMM call took, by op and format key (run a step first).

    With ``model``, only the keys its ``ms.Linear`` layers use (their recipes' operand formats,
    and the weights' ``quantize_rowcol_many`` where :func:`microscale.weight_cache` ran it).
    """
    paths = dict(_PATHS)
    if model is not None:
        used = set()
        for m in model.modules():
            recipe = getattr(m, "recipe", None)
            if hasattr(m, "op_keys"):               # e.g. grouped (MoE) layers: their own ops
                used |= m.op_keys()
            elif recipe is not None and hasattr(recipe, "op_keys"):
                used |= recipe.op_keys() | recipe.weight_cache_keys()
        # "KEY detail" entries (e.g. one kernel for one block pair of KEY) belong to KEY
        paths = {k: v for k, v in paths.items() if (k[0], k[1].split(" ", 1)[0]) in used}
    return PathReport(paths)
