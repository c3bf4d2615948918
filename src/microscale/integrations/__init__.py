"""Glue to other libraries, each imported only when used (``import microscale`` stays light).

* :mod:`microscale.integrations.transformers` -- reload a converted Hugging Face model from a
  ``save_pretrained`` / ``Trainer`` directory as the same quantized model
  (:func:`~microscale.integrations.transformers.from_pretrained`).
* :mod:`microscale.integrations.export` -- ``ms.export(model, dir, format=...)``: atomic export
  of a converted model for serving.
* :mod:`microscale.integrations.compressed_tensors` -- the ``"compressed-tensors"`` format:
  each recipe's fprop weight operand in the packed layouts vLLM / SGLang / transformers read.

None of these modules imports its library at module level; the functions do, and raise a
one-line ``ImportError`` naming the extra to install when the library is missing.
"""

from __future__ import annotations

import importlib

_MODULES = ("transformers", "export", "compressed_tensors")


def __getattr__(name: str):
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
