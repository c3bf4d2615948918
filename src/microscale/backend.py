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
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
from typing import Callable

import torch

from .validate import BACKENDS, check_backend

__all__ = ["BACKENDS", "KernelUnsupported", "register_kernel", "dispatch", "triton_available"]

log = logging.getLogger(__name__)
_KERNELS: dict[tuple[str, str], Callable] = {}
_loaded = False


class KernelUnsupported(Exception):
    """Raised by a kernel for arguments it cannot handle (shape, dtype, stride, option)."""


def register_kernel(op: str, key: str):
    """Decorator: register ``fn`` as the Triton implementation of ``(op, key)``."""
    def deco(fn):
        _KERNELS[(op, key)] = fn
        return fn
    return deco


def triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None


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


def dispatch(op: str, key: str, backend: str, device: torch.device,
             reference: Callable, *args, **kwargs):
    """Run ``op`` for ``key`` (a format name) on the chosen backend."""
    check_backend(backend)
    if backend == "reference":
        return reference(*args, **kwargs)
    want_kernel = backend == "triton" or device.type == "cuda"
    if want_kernel:
        _load_kernels()
    kernel = _KERNELS.get((op, key))
    if backend == "triton":
        if kernel is None:
            why = "Triton is not installed" if not triton_available() else "no kernel is registered"
            raise ValueError(f"backend='triton' for {op}({key}): {why}")
        if device.type == "cpu" and not _interpreting():
            raise ValueError(f"backend='triton' on a CPU tensor needs TRITON_INTERPRET=1 "
                             f"(set before importing triton) for {op}({key})")
        try:
            return kernel(*args, **kwargs)
        except KernelUnsupported as err:
            raise ValueError(f"backend='triton' cannot run {op}({key}): {err}") from None
    if kernel is not None and device.type == "cuda":
        try:
            return kernel(*args, **kwargs)
        except KernelUnsupported as err:
            log.debug("%s(%s) falls back to the reference: %s", op, key, err)
    return reference(*args, **kwargs)
