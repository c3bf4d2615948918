"""``ms.export``: write a trained, converted model in a format serving engines load.

    ms.export(model, "out/llama-nvfp4", format="compressed-tensors")

Formats (one today):

``"compressed-tensors"``
    A Hugging Face directory (``config.json`` with a ``quantization_config``, safetensors
    weights) whose converted layers hold the recipe's fprop weight operand in the packed
    compressed-tensors layouts (NVFP4, MXFP4, MXFP8, FP8 blockwise / tensorwise) and whose
    high-precision linears are listed as ignored. Read by vLLM, SGLang and
    ``transformers.AutoModelForCausalLM.from_pretrained``. The mapping, the NVFP4 global-scale
    convention and what cannot be expressed: :mod:`microscale.integrations.compressed_tensors`.

Atomic: everything is written to a temporary sibling directory, which is renamed into place
only when complete, so ``dir`` either holds a whole export or what it held before (a crash or
a full disk leaves at most a ``.<name>.*.tmp`` sibling, removed on error). An existing ``dir``
is replaced only with ``overwrite=True`` (the old one is moved aside, the new one renamed in,
then the old one deleted).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import torch
from torch import nn

__all__ = ["export", "FORMATS"]

FORMATS = ("compressed-tensors",)


def _replace_dir(tmp: Path, path: Path) -> None:
    """Rename ``tmp`` to ``path``; an existing ``path`` is moved aside first, then deleted."""
    if not path.exists():
        os.replace(tmp, path)
        return
    old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".old"))
    os.replace(path, old / "export")
    try:
        os.replace(tmp, path)
    except BaseException:
        os.replace(old / "export", path)              # put the previous export back
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)


def export(model: nn.Module, path: str | os.PathLike, format: str = "compressed-tensors", *,
           dtype: torch.dtype = torch.bfloat16, overwrite: bool = False) -> Path:
    """Export a converted model to ``path`` atomically; returns ``path``.

    Args:
        model: a model converted with :func:`microscale.convert` (for compressed-tensors, a
            Hugging Face ``PreTrainedModel``).
        path: the output directory (created; must not exist unless ``overwrite``).
        format: one of :data:`FORMATS`.
        dtype: dtype of everything left in high precision (embeddings, norms, kept layers).
        overwrite: replace an existing directory at ``path``.
    """
    if format not in FORMATS:
        raise ValueError(f"export: unknown format {format!r}; supported: {', '.join(FORMATS)}")
    if dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise ValueError(f"export: dtype must be bfloat16, float16 or float32, got {dtype}")
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"export: {path} exists and is not a directory")
    if path.exists() and not overwrite:
        raise ValueError(f"export: {path} already exists; pass overwrite=True to replace it")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        from .compressed_tensors import write_compressed_tensors

        write_compressed_tensors(model, tmp, dtype)
        _replace_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path
