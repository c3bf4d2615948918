"""The harness on N processes: DDP or FSDP2, one global batch, DCP checkpoints.

Launch (one process per GPU, or per CPU "device" with gloo)::

    torchrun --nproc_per_node N -m microscale.train.cli train --dist fsdp ...

What stays independent of N
===========================
``--batch-size`` is the *global* batch. Batch ``s`` is drawn exactly as in one process (a pure
function of ``(seed, s)``, :class:`~.data.BatchSampler`) and rank r of N trains on rows
``[r·B/N, (r+1)·B/N)`` of it (B must divide by N). Each rank's loss is the mean over its rows;
DDP's all-reduce and FSDP2's reduce-scatter average the gradients over ranks, which is the
gradient of the global mean. So the data order, the LR schedule (a function of the step) and
the logged loss (the mean over ranks) are those of one process, up to summation order.

What each rank does
===================
* ``--dist ddp``: the model is replicated (``DistributedDataParallel``).
* ``--dist fsdp``: every block, then the root, is ``fully_shard``-ed (FSDP2): parameters,
  gradients and AdamW state are sharded on dim 0. ``--all-gather quantized`` moves each
  quantized layer's weight in its fprop format (:mod:`microscale.distributed.allgather`); the
  default ``auto`` does so when every quantized layer meets the shard rule and no precision
  switch is scheduled, and logs which it chose and why.
* Tensorwise FP8 amaxes are agreed over all ranks and SR seeds carry the rank
  (:mod:`microscale.distributed.reduce`).
* ``--cuda-graph`` (FSDP2 only): forward + backward of a step, FSDP2's all-gathers and
  reduce-scatters included, are captured in one CUDA graph after the warm-up steps and
  replayed (NCCL collectives are capturable); the optimizer step and the loss all-reduce
  stay outside. This removes the per-layer host time that makes small models host-bound.
* Only rank 0 writes ``config.json``, ``metrics.jsonl`` and the progress output.
* A step's loss and gradient norm are all-reduced together (the step's one host sync); a NaN or
  Inf on any rank makes the sum non-finite on every rank, so every rank stops with
  :class:`~.trainer.DivergenceError` (exit code 3) at the same step.

Checkpoints
===========
``checkpoints/step_NNNNNN.dcp/`` is a ``torch.distributed.checkpoint`` directory of the model
and optimizer state dicts (``get_state_dict``: fully qualified names, DTensor shards under
FSDP2, each layer's ``_extra_state``), written by every rank into a temp directory that rank 0
renames into place; ``step_NNNNNN.json`` (rank 0, written last) holds the step, sampler,
config, time and RNG state. DCP re-shards on load, so a run saved on N processes resumes on M
(and DDP and FSDP2 checkpoints load into each other). All ranks draw the same torch random
numbers (same seed, same calls; the rank enters only through :func:`~microscale.distributed.
rank_seeds`), so rank 0's RNG state restores every rank. The newest two are kept.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ..tensor import QFormat
from .checkpoint import _unb64, atomic_write_text, rng_state, set_rng_state
from .records import truncate_metrics
from .trainer import TrainConfig, Trainer

__all__ = ["DistTrainer", "init_process_group", "latest_dcp_checkpoint"]

log = logging.getLogger(__name__)


def init_process_group(cfg: TrainConfig) -> tuple[int, int]:
    """Join the torchrun job (``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` from the environment):
    NCCL on CUDA, gloo on CPU. Sets ``cfg.device`` to this rank's device. (rank, world)."""
    if "WORLD_SIZE" not in os.environ:
        raise ValueError(f"--dist {cfg.dist} needs a torchrun launch (no WORLD_SIZE in the "
                         "environment): torchrun --nproc_per_node N -m microscale.train.cli "
                         "train --dist ...")
    cuda = (cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")).startswith("cuda")
    if cuda:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        cfg.device = f"cuda:{local}"
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    return dist.get_rank(), dist.get_world_size()


def latest_dcp_checkpoint(ckpt_dir: Path) -> Path | None:
    """The newest ``step_*.json`` of a DCP checkpoint whose directory is complete."""
    found = []
    for meta in ckpt_dir.glob("step_*.json") if ckpt_dir.is_dir() else []:
        try:
            info = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        if info.get("format") == "dcp" and (ckpt_dir / info["dcp"] / ".metadata").is_file():
            found.append((info["step"], meta))
    return max(found)[1] if found else None


class DistTrainer(Trainer):
    """:class:`~.trainer.Trainer` on every rank of a process group (see the module docs)."""

    def __init__(self, config: TrainConfig, monitor=None, data=None):
        if config.cuda_graph and config.dist != "fsdp":
            raise ValueError(f"--cuda-graph with --dist {config.dist} is not supported (only "
                             "--dist fsdp captures its collectives in the step's graph; DDP's "
                             "bucketed all-reduce has not been tried under capture)")
        if getattr(config, "stop_after_s", None) is not None:   # each rank's own clock would
            raise ValueError("--stop-after is not supported with --dist yet (the ranks would "
                             "decide on their own clocks when to stop; use --steps)")
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        if config.batch_size % self.world:
            raise ValueError(f"--batch-size {config.batch_size} (the global batch) must divide "
                             f"by the {self.world} processes")
        self.is_writer = self.rank == 0
        super().__init__(config, monitor=monitor, data=data)

    def release(self) -> None:
        """Drop the step's CUDA graph, the DDP/FSDP2 wrapper and the optimizer before the process
        group is destroyed (a live graph with captured NCCL work makes
        ``destroy_process_group`` hang: pytorch/pytorch#115388)."""
        if getattr(self, "_step_graph", None) is not None:
            self._step_graph.reset()
        self.net = self.optimizer = None

    # ------------------------------------------------------------------ model
    def _parallelize(self, model: torch.nn.Module) -> torch.nn.Module:
        if self.cfg.dist == "ddp":
            from torch.nn.parallel import DistributedDataParallel
            ids = [self.device.index] if self.device.type == "cuda" else None
            return DistributedDataParallel(model, device_ids=ids)
        from torch.distributed.fsdp import fully_shard
        self.quantized_all_gather = self._all_gather_choice(model)
        if self.quantized_all_gather:
            from ..distributed import enable_quantized_all_gather
            enable_quantized_all_gather(model, self.world)
        for block in model.blocks:
            fully_shard(block)
        return fully_shard(model)

    def _all_gather_choice(self, model) -> bool:
        """``--all-gather``: quantized, fp32, or auto (quantized when it can be)."""
        want = self.cfg.all_gather
        if want == "fp32" or self.recipe is None:
            return False
        reason = None
        if self.cfg.switch_step is not None:
            reason = "a precision switch needs the fp32 weight"
        elif self.cfg.cuda_graph and self.recipe.fprop.b.format == QFormat.NVFP4:
            reason = ("the NVFP4 quantized all-gather inside a CUDA graph (--cuda-graph) did not "
                      "train on two H200s (2026-11-23: the loss rose and the run stalled); "
                      "the fp32 all-gather is the verified path with --cuda-graph")
        else:
            from ..distributed import all_gather_bytes
            try:
                all_gather_bytes(model, self.world)
            except ValueError as err:
                reason = str(err)
        if reason and want == "quantized":
            raise ValueError(f"--all-gather quantized: {reason}")
        if self.is_writer:
            log.info("FSDP2 weight all-gather: %s", f"fp32 ({reason})" if reason else "quantized")
        return reason is None

    # ------------------------------------------------------------------ one step
    def _batch(self, s: int):
        x, y = self.sampler.batch(s)
        n = x.shape[0] // self.world
        return x[self.rank * n:(self.rank + 1) * n], y[self.rank * n:(self.rank + 1) * n]

    def _step_values(self, loss: torch.Tensor, grad_norm: torch.Tensor) -> list[float]:
        if isinstance(grad_norm, torch.distributed.tensor.DTensor):   # FSDP2: sharded grads
            grad_norm = grad_norm.full_tensor()
        values = torch.stack([loss.detach().float(), grad_norm.float()])
        dist.all_reduce(values)                    # a NaN on any rank reaches every rank
        return (values / self.world).tolist()

    @torch.no_grad()
    def evaluate(self) -> float:
        """Mean validation loss: each rank its rows of every fixed batch, averaged over ranks."""
        self.net.eval()
        total = torch.zeros((), device=self.device)
        for x, y in self.val:
            n = x.shape[0] // self.world
            x, y = (t[self.rank * n:(self.rank + 1) * n] for t in (x, y))
            with torch.autocast(self.device.type, dtype=torch.bfloat16):
                logits = self.net(x)
            total += F.cross_entropy(logits.flatten(0, 1), y.flatten()).float()
        self.net.train()
        dist.all_reduce(total)
        return total.item() / (self.world * len(self.val))

    # ------------------------------------------------------------------ checkpoints (DCP)
    def _state(self) -> dict:
        from torch.distributed.checkpoint.state_dict import get_state_dict

        from ..distributed.allgather import plain_state_dict
        model_sd, optim_sd = get_state_dict(self.net, self.optimizer)
        return {"model": plain_state_dict(model_sd), "optim": optim_sd}

    def save(self) -> Path:
        """Every rank writes its shards into a temp directory; rank 0 renames it into place,
        then writes the JSON (so a JSON always names a complete directory)."""
        import torch.distributed.checkpoint as dcp
        name = f"step_{self.step:06d}"
        tmp, final = self.ckpt_dir / f".{name}.dcp.tmp", self.ckpt_dir / f"{name}.dcp"
        if self.is_writer:
            self.ckpt_dir.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(tmp, ignore_errors=True)
        dist.barrier()
        dcp.save(self._state(), checkpoint_id=str(tmp))
        dist.barrier()
        meta = self.ckpt_dir / f"{name}.json"
        if self.is_writer:
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
            info = {"format": "dcp", "dcp": final.name, "step": self.step, "world": self.world,
                    "dist": self.cfg.dist, "rng": rng_state(), "rng_device": self.device.index, "train_time": self.train_time,
                    "sampler": self.sampler.state_dict(), "config": self._config_dict()}
            atomic_write_text(meta, json.dumps(info))
            self._prune(keep=2)
        dist.barrier()
        return meta

    def _config_dict(self) -> dict:
        import dataclasses
        return dataclasses.asdict(self.cfg)

    def _prune(self, keep: int) -> None:
        metas = sorted(self.ckpt_dir.glob("step_*.json"))
        for meta in metas[:-keep]:
            meta.unlink(missing_ok=True)                 # the JSON first, then its directory
            shutil.rmtree(meta.with_suffix(".dcp"), ignore_errors=True)

    def _start(self) -> None:
        """Fresh start (rank 0 clears old outputs) or resume from the newest DCP checkpoint,
        re-sharded onto this world size."""
        ckpt = latest_dcp_checkpoint(self.ckpt_dir) if self.cfg.resume else None
        if ckpt is None:
            if self.cfg.resume and self.is_writer:
                log.info("--resume: no checkpoint in %s, starting from step 0", self.ckpt_dir)
            if self.is_writer:
                self.out.mkdir(parents=True, exist_ok=True)
                for old in self.ckpt_dir.glob("*step_*") if self.ckpt_dir.is_dir() else []:
                    shutil.rmtree(old) if old.is_dir() else old.unlink()
                (self.out / "metrics.jsonl").unlink(missing_ok=True)
        else:
            self._resume(ckpt)
        if self.is_writer:
            config = {**self._run_config(), "world_size": self.world,
                      "quantized_all_gather": getattr(self, "quantized_all_gather", False)}
            atomic_write_text(self.out / "config.json", json.dumps(config, indent=2, default=str))
        dist.barrier()

    def _resume(self, ckpt: Path) -> None:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import set_state_dict
        info = json.loads(ckpt.read_text())
        self._check_resumable(info["config"])
        state = self._state()
        dcp.load(state, checkpoint_id=str(self.ckpt_dir / info["dcp"]))
        set_state_dict(self.net, self.optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optim"])
        set_rng_state(info["rng"])
        if self.device.type == "cuda" and "torch_cuda" in info["rng"]:   # rank 0's device stream
            saved = info["rng"]["torch_cuda"][info.get("rng_device") or 0]
            torch.cuda.set_rng_state(_unb64(saved), self.device)
        self.sampler.load_state_dict(info["sampler"])
        self.step, self.train_time = info["step"], info["train_time"]
        if self.is_writer:
            truncate_metrics(self.out / "metrics.jsonl", self.step)
            log.info("resumed from %s (saved on %d processes) at step %d on %d", ckpt,
                     info["world"], self.step, self.world)
