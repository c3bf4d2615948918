"""Multi-process training on ``torch.distributed``: what microscale adds to DDP and FSDP2.

``ms.Linear`` keeps ordinary fp32 parameters, so PyTorch's own engines shard and replicate it
unchanged: ``DistributedDataParallel`` all-reduces its gradients, FSDP2's ``fully_shard``
shards its weight on dim 0 and all-gathers it before the GEMMs. What a quantized layer needs on
top is agreement, and (optionally) a cheaper all-gather:

* :mod:`~microscale.distributed.reduce`: tensorwise FP8 amaxes of activations and gradients are
  all-reduced (MAX) so every rank quantizes with one scale (on by default under
  ``torch.distributed``; :func:`set_amax_group`), and stochastic rounding seeds carry the rank
  (:func:`rank_seeds`).
* :mod:`~microscale.distributed.allgather`: FSDP2 all-gathers the weight already in the
  recipe's fprop weight format (FP8, MXFP8, NVFP4 codes and scales) instead of fp32, bit-
  identical to quantizing the full weight on one process (:func:`quantized_all_gather`), and
  :func:`all_gather_bytes` counts what that saves.

See ``docs/distributed.md`` for launching, checkpoints and the shard-boundary rules.
"""

from __future__ import annotations

import importlib

from .reduce import amax_group_name, rank_seeds, set_amax_group, sr_rank

__all__ = [
    "GatheredWeight",
    "QuantizedShardWeight",
    "all_gather_bytes",
    "amax_group_name",
    "check_shards",
    "enable_quantized_all_gather",
    "quantized_all_gather",
    "rank_seeds",
    "set_amax_group",
    "shard_rows_multiple",
    "sr_rank",
]

_LAZY = {name: "microscale.distributed.allgather"
         for name in ("quantized_all_gather", "QuantizedShardWeight", "GatheredWeight",
                      "all_gather_bytes", "shard_rows_multiple", "enable_quantized_all_gather",
                      "check_shards")}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'microscale.distributed' has no attribute {name!r}")
