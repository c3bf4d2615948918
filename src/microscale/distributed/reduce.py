"""What ranks agree on before they quantize: per-tensor amaxes, and distinct SR streams.

Why agree on an amax
====================
Tensorwise FP8 has one scale per tensor, ``scale = fp8_max / amax`` (SPEC §8). Under data
parallelism every rank holds a different slice of the batch, so its activations x and
gradients dy have different amaxes, and without an agreement each rank would quantize with
its own scale. Transformer Engine takes the MAX over the data-parallel group so that every rank
quantizes with the scale the whole global batch would have had; microscale does the same:

    current scaling   amax = max|x| on this rank  ->  all-reduce(MAX)  ->  scale for every rank
    delayed scaling   the amax recorded in the history is all-reduced(MAX) first, so every
                      rank's history, and hence its next scale, is identical

Only activation and gradient operands are reduced. The weight a GEMM reads is the same on every
rank (DDP replicates it; FSDP2 all-gathers the full weight before the GEMM), so its amax already
agrees. Block-scaled formats (MX, FP8 blockwise, NVFP4's block scales) take their scales from
a block inside one rank's rows, which needs no agreement; NVFP4's per-tensor amax of
activations stays per rank (it only sets the range of the E4M3 block scales).

The reduction is one scalar all-reduce per reduced tensor, issued as the functional collective
``_c10d_functional.all_reduce`` + ``wait_tensor`` on a device tensor: no host sync, and
``torch.compile(fullgraph=True)`` traces it (tested with gloo on CPU).

Which group. :func:`set_amax_group` picks it: ``"default"`` (the default) is the WORLD group
whenever ``torch.distributed`` is initialized with more than one rank (so plain DDP/FSDP
training agrees without any call); a ``ProcessGroup`` restricts it (for example to the
data-parallel dimension of a ``DeviceMesh``); ``None`` turns the agreement off (per-rank
amaxes, as before). The group is resolved when a layer's forward runs and a compiled graph
bakes it in: set it before compiling.

Stochastic rounding per rank
============================
A layer draws its SR seeds from torch's default generator (or its own generator). The harness
seeds every rank identically (the same initialization), so without care every rank would draw
the same seeds and round its (different) gradients with the same random bits. :func:`rank_seeds`
mixes the rank in::

    seed_on_rank_r = (seed + r * 0x9E3779B1) mod (2^31 - 1)

Rank 0 keeps the single-process seeds, so a one-rank run is bit-identical to a run without
``torch.distributed``; every rank's stream is a pure function of (torch seed, rank).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

__all__ = [
    "RANK_STRIDE",
    "SEED_MODULUS",
    "all_gather_rows",
    "all_reduce_max",
    "amax_group_name",
    "global_amax",
    "rank_seeds",
    "set_amax_group",
    "sr_rank",
]

SEED_MODULUS = 2**31 - 1        # the seeds a layer draws lie in [0, 2^31 - 1)
RANK_STRIDE = 0x9E3779B1        # odd, ~2^31·(golden ratio − 1): ranks land far apart

_DEFAULT = "default"
_amax_group: object = _DEFAULT


def set_amax_group(group: dist.ProcessGroup | str | None = _DEFAULT) -> None:
    """Which ranks agree on tensorwise-FP8 amaxes: ``"default"`` (WORLD when initialized with
    more than one rank), a ``ProcessGroup``, or ``None`` (off: every rank uses its own amax).

    Call it before compiling a model: a compiled graph keeps the group it was traced with.
    """
    if group is not None and group != _DEFAULT and not isinstance(group, dist.ProcessGroup):
        raise TypeError("set_amax_group expects 'default', None or a torch.distributed "
                        f"ProcessGroup, got {type(group).__name__}")
    global _amax_group
    _amax_group = group


@torch.compiler.assume_constant_result
def amax_group_name() -> str:
    """The name of the group amaxes are reduced over, or ``""`` when there is none (off, not
    initialized, or a single rank). A constant to dynamo: resolved once per compiled graph."""
    if _amax_group is None or not dist.is_available() or not dist.is_initialized():
        return ""
    group = dist.group.WORLD if _amax_group == _DEFAULT else _amax_group
    if dist.get_world_size(group) < 2:
        return ""
    return group.group_name


@torch.compiler.assume_constant_result
def sr_rank() -> int:
    """This process's global rank (0 without ``torch.distributed``); mixed into SR seeds."""
    if not dist.is_available() or not dist.is_initialized():
        return 0
    return dist.get_rank()


def rank_seeds(seeds: torch.Tensor) -> torch.Tensor:
    """``seeds`` (int32 or int64, in [0, 2^31 - 1)) moved to this rank's stream (computed in
    int64, returned in the seeds' dtype); unchanged on rank 0."""
    rank = sr_rank()
    if rank == 0:
        return seeds
    return ((seeds.long() + rank * RANK_STRIDE) % SEED_MODULUS).to(seeds.dtype)


def all_reduce_max(t: torch.Tensor, group_name: str) -> torch.Tensor:
    """MAX of ``t`` over the group, as a traced functional collective (no host sync)."""
    out = torch.ops._c10d_functional.all_reduce(t, "max", group_name)
    return torch.ops._c10d_functional.wait_tensor(out)


def all_gather_rows(t: torch.Tensor, world: int, group_name: str) -> torch.Tensor:
    """Every rank's ``t`` concatenated along dim 0 (rank order), as a functional collective."""
    out = torch.ops._c10d_functional.all_gather_into_tensor(t.contiguous(), world, group_name)
    return torch.ops._c10d_functional.wait_tensor(out)


def local_amax(t2d: torch.Tensor) -> torch.Tensor:
    """fp32 ``max|t|`` of a 2-D tensor, NaN counted as 0 (the quantizers' rule with
    ``check_finite=False``). Row maxima first, then their max: the same number as one global
    reduction (max is exact), in a form a compiler fuses into the kernel that produces ``t2d``
    (a norm's per-row reduction, an activation, a copy), so the amax costs no pass of its own."""
    a = t2d.abs()
    a = torch.where(torch.isnan(a), torch.zeros_like(a), a)
    return a.amax(dim=-1).amax().float() if t2d.numel() else torch.zeros((), device=t2d.device)


def global_amax(t: torch.Tensor, group_name: str) -> torch.Tensor:
    """:func:`local_amax` agreed over every rank of the group (MAX), so that every rank
    quantizes with the same tensorwise scale."""
    return all_reduce_max(local_amax(t.reshape(-1, t.shape[-1])), group_name)
