"""The training loop: one recipe, one model, deterministic data, exact resume.

Precision. Master weights, gradients and AdamW state are fp32 for every recipe. The forward
runs under ``torch.autocast(bf16)``: embeddings, norms (fp32 math, bf16 out), attention and the
head compute in bf16 for every recipe. For ``bf16`` the block linears are plain ``nn.Linear``
(bf16 GEMMs via autocast, ``ms.convert`` is not called); for any other recipe
``ms.convert(model, recipe, keep_high_precision=...)`` swaps them for ``ms.Linear`` layers that
quantize the same bf16 activations. So the baseline and the quantized runs differ only in the
GEMMs the recipe quantizes.

One step ``s`` (0-based; the JSONL ``step`` is ``s + 1``, the number of updates done)::

    lr = schedule(s)                          cosine, or WSD (warmup, stable, linear decay)
    PrecisionSchedule.apply(model, s)         optional: bf16 fprop/all GEMMs from --switch-step
    x, y = sampler.batch(s)                   pure function of (seed, s)
    loss = CE(model(x), y); loss.backward(); clip grad norm
    NaN/Inf loss or grad norm -> DivergenceError (no update applied); else AdamW step
    monitor(s + 1, model, (x, y))             optional; its dict joins the step's record
    log / eval / checkpoint on their cadences

Speed. On CUDA (``compile="auto"``) every block is compiled with ``torch.compile`` (one graph
per distinct block: the quantized layers are custom ops, so nothing breaks the graph), AdamW is
the fused one, and a step syncs with the host once (loss and grad norm together, before the
update). ``cuda_graph=True`` replays forward + backward from one CUDA graph (no host work per
kernel: what small models need, whose steps are otherwise launch-bound); ``compile_mode=
"reduce-overhead"`` is Inductor's per-block alternative. Records carry tokens/s and,
on a GPU whose bf16 peak is known, ``mfu`` = tokens/s · :func:`~.model.flops_per_token` / peak.

Resume restores model, optimizer, every RNG and the step, so the losses after a resume are
those of the uninterrupted run. A fresh (non-resume) run in an existing ``--out`` directory
replaces that directory's metrics and checkpoints.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import platform
import resource
import time
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

from ..nn.weight_cache import groups_weights, weight_cache
from .checkpoint import (
    atomic_write_text,
    latest_checkpoint,
    load_checkpoint,
    resume_point,
    save_checkpoint,
)
from .config import _RESUME_FIXED, DivergenceError, TrainConfig, keep_hp_arg, lr_at
from .cpu_gemm import cpu_bf16_gemm, cpu_gemm_context
from .data import BatchSampler, TokenData, load_data
from .model import build_model, flops_per_token
from .records import Window, progress_bar, report_progress, truncate_metrics
from .speed import (
    COMPILE_MODES,
    StepGraph,
    compile_blocks,
    compiled_grad_check,
    device_name,
    peak_flops,
)

__all__ = ["TrainConfig", "Trainer", "DivergenceError", "lr_at", "keep_hp_arg", "compile_blocks",
           "peak_flops", "COMPILE_MODES"]

log = logging.getLogger(__name__)

Monitor = Callable[[int, torch.nn.Module, tuple], "dict | None"]

def _device(name: str | None) -> torch.device:
    if name is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was requested but CUDA is not available")
    return device


def _mem_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # Linux: KiB


class Trainer:
    """Train ``config.model`` with ``config.recipe``; ``fit()`` returns the final record.

    ``monitor(step, model, batch) -> dict | None`` runs after every update (``batch`` is the
    ``(inputs, targets)`` pair on the device); a returned dict is merged into that step's JSONL
    record (and forces a record on a step that would not log otherwise).
    """

    def __init__(self, config: TrainConfig, monitor: Monitor | None = None, data: TokenData | None = None):
        self.cfg, self.monitor = config, monitor
        self.device = _device(config.device)
        self.out = Path(config.out)
        self.ckpt_dir = self.out / "checkpoints"
        self.data = data if data is not None else load_data(config.data, config.cache_dir, config.max_bytes)
        self.sampler = BatchSampler(self.data, config.batch_size, config.seq_len, config.sampler_seed,
                                    config.order)
        self.sampler.check_steps(config.steps)       # one epoch at most, or a loud warning
        self.step, self.train_time, self.finished = 0, 0.0, False
        self.report = None
        self._build()

    # ------------------------------------------------------------------ setup
    def _build(self) -> None:
        cfg = self.cfg
        torch.manual_seed(cfg.seed)
        overrides = {"mlp": cfg.mlp} if cfg.mlp else {}
        model = build_model(cfg.model, self.data.vocab_size, max_seq_len=max(cfg.seq_len, 16), **overrides)
        self.recipe, self.schedule = None, None
        if cfg.recipe != "bf16":
            model = self._convert(model)
        torch.manual_seed(cfg.seed + 1)   # the same training RNG stream whatever convert drew
        self.model = model.to(self.device)
        self.compiled = self._compile_wanted()
        if self.compiled:
            compile_blocks(self.model, cfg.compile_mode)
        self.bf16_gemm = cpu_bf16_gemm(self.device, self.compiled)   # "fp32" on most CPUs
        self.net = self._parallelize(self.model)      # what forward runs (DDP wraps; FSDP2 shards)
        self._group_weights = self.recipe is not None and cfg.dist != "fsdp" \
            and groups_weights(self.model)
        decay = [p for p in self.model.parameters() if p.dim() >= 2]
        no_decay = [p for p in self.model.parameters() if p.dim() < 2]
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=cfg.lr, betas=(0.9, 0.95), eps=1e-8, fused=self.device.type == "cuda")
        self.flops_per_token = flops_per_token(self.model.config, cfg.seq_len)
        self._step_graph = StepGraph(self) if cfg.cuda_graph else None
        if cfg.cuda_graph and self.device.type != "cuda":
            raise ValueError("cuda_graph needs a CUDA device")
        self.peak_flops = peak_flops(self.device)
        self.val = [(x.to(self.device), y.to(self.device)) for x, y in self.sampler.val_batches(cfg.eval_batches)]

    def _parallelize(self, model: torch.nn.Module) -> torch.nn.Module:
        """One process: the model itself (:class:`~.distributed.DistTrainer` wraps or shards)."""
        return model

    is_writer = True           # this process writes config, metrics and checkpoints

    def _batch(self, s: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Batch ``s`` of this process (all of it here; a rank's rows under data parallelism)."""
        return self.sampler.batch(s)

    def _step_values(self, loss: torch.Tensor, grad_norm: torch.Tensor) -> list[float]:
        """(loss, grad norm) on the host: the step's one sync."""
        return torch.stack([loss.detach().float(), grad_norm.float()]).tolist()

    def _convert(self, model: torch.nn.Module) -> torch.nn.Module:
        import microscale as ms  # the layers load lazily; bf16 runs never need them

        cfg = self.cfg
        self.recipe = ms.Recipe.from_name(cfg.recipe, **({"backend": cfg.backend} if cfg.backend else {}))
        kwargs = {} if cfg.keep_hp is None else {"keep_high_precision": keep_hp_arg(cfg.keep_hp)}
        self.report = ms.convert(model, self.recipe, **kwargs)
        if cfg.recompute_input is not None:          # None: each layer's default
            ms.set_recompute_input(model, cfg.recompute_input)
        log.info("%s", str(self.report).splitlines()[0])     # the full table goes to config.json
        log.debug("%s", self.report)
        if cfg.switch_step is not None:
            self.schedule = ms.PrecisionSchedule(cfg.switch_step, cfg.switch_mode)
        return model

    def _compile_wanted(self) -> bool:
        """``--compile auto`` compiles on CUDA (where it pays: fused elementwise work, no
        per-op launches) and not on CPU (Inductor's compile time outweighs short CPU runs)."""
        if self.cfg.compile == "auto":
            return self.device.type == "cuda"
        return self.cfg.compile == "on"

    def _run_config(self) -> dict:
        return {**dataclasses.asdict(self.cfg), "device_resolved": str(self.device),
                "threads_resolved": self._threads(), "cpu_bf16_gemm": self.bf16_gemm,
                "model_config": dataclasses.asdict(self.model.config), "params": self.model.num_params(),
                "data_desc": self.data.describe(), "data_meta": self.data.meta, "recipe_desc": str(self.recipe) if self.recipe else "bf16",
                "convert_report": str(self.report) if self.report is not None else None,
                "compiled": self.compiled, "flops_per_token": self.flops_per_token,
                "peak_flops": self.peak_flops, "device_name": device_name(self.device),
                "torch": torch.__version__, "python": platform.python_version()}

    def _start(self) -> None:
        """Fresh start (clear old outputs) or resume from the newest checkpoint."""
        self.out.mkdir(parents=True, exist_ok=True)
        metrics = self.out / "metrics.jsonl"
        ckpt = resume_point(self.ckpt_dir) if self.cfg.resume else None   # newest intact one
        if ckpt is None:
            if self.cfg.resume:
                log.info("--resume: no checkpoint in %s, starting from step 0", self.ckpt_dir)
            for old in list(self.ckpt_dir.glob("step_*")) if self.ckpt_dir.is_dir() else []:
                old.unlink()
            metrics.unlink(missing_ok=True)
        else:
            self._check_resumable(json.loads(ckpt.read_text())["config"])   # before touching the model
            meta = load_checkpoint(ckpt, self.model, self.optimizer)
            self.sampler.load_state_dict(meta["sampler"])
            self.step, self.train_time = meta["step"], meta["train_time"]
            truncate_metrics(metrics, self.step)
            log.info("resumed from %s at step %d", ckpt, self.step)
        atomic_write_text(self.out / "config.json", json.dumps(self._run_config(), indent=2, default=str))

    def _check_resumable(self, saved: dict) -> None:
        defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)}   # older checkpoints
        diff = [f"{k}: checkpoint {saved.get(k, defaults[k])!r}, now {getattr(self.cfg, k)!r}"
                for k in _RESUME_FIXED if saved.get(k, defaults[k]) != getattr(self.cfg, k)]
        if diff:
            raise ValueError("cannot resume: the run's config differs from the checkpoint's: " + "; ".join(diff))

    # ------------------------------------------------------------------ one step
    def _train_step(self, s: int) -> tuple[float, float, tuple]:
        for group in self.optimizer.param_groups:
            group["lr"] = lr_at(s, self.cfg)
        if self.schedule is not None:
            self.schedule.apply(self.model, s)
        x, y = (t.to(self.device, non_blocking=True) for t in self._batch(s))
        graph = self._step_graph.get(x, y) if self._step_graph is not None else None
        loss, grad_norm = graph if graph is not None else self._forward_backward(x, y)
        # the one host sync of a step: both values at once, before any update is applied
        loss_value, norm_value = self._step_values(loss, grad_norm)
        for what, value in (("the loss", loss_value), ("the gradient norm", norm_value)):
            if not math.isfinite(value):
                self.optimizer.zero_grad(set_to_none=True)
                raise DivergenceError(what, value, s + 1, latest_checkpoint(self.ckpt_dir))
        self.optimizer.step()
        if graph is None:                 # a replayed graph overwrites its own grad tensors
            self.optimizer.zero_grad(set_to_none=True)
        self.sampler.index = s + 1
        return loss_value, norm_value, (x, y)

    def _forward_backward(self, x: torch.Tensor, y: torch.Tensor):
        """Loss, backward and the clipped grad norm: (loss, norm) as device tensors."""
        if self.compiled and "reduce-overhead" in self.cfg.compile_mode:
            torch.compiler.cudagraph_mark_step_begin()   # the last step's graph outputs are done
        if self.cfg.grad_accum > 1:
            loss = self._accumulate(x, y, self.cfg.grad_accum)
        else:                  # FP8 128x128 weights: all quantized in one launch (weight_cache)
            with weight_cache(self.model) if self._group_weights else contextlib.nullcontext():
                loss = self._loss_backward(x, y)
        clip = self.cfg.grad_clip if self.cfg.grad_clip > 0 else float("inf")
        return loss, torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip, foreach=True)

    def _accumulate(self, x: torch.Tensor, y: torch.Tensor, n: int) -> torch.Tensor:
        """The batch as ``n`` micro-batches, gradients summed (each loss scaled by 1/n), the
        weights quantized once for all of them (``ms.weight_cache``; FSDP2 gathers per forward)."""
        if x.shape[0] % n:
            raise ValueError(f"grad_accum={n} must divide this process's batch of "
                             f"{x.shape[0]} sequences")
        once = self.recipe is not None and self.cfg.dist != "fsdp"
        loss = torch.zeros((), device=x.device)
        with weight_cache(self.model) if once else contextlib.nullcontext():
            for xc, yc in zip(x.chunk(n), y.chunk(n)):
                loss = loss + self._loss_backward(xc, yc, n)
        return loss

    def _loss_backward(self, x: torch.Tensor, y: torch.Tensor, divisor: int = 1):
        """The mean cross-entropy of one (micro-)batch over ``divisor``, backpropagated;
        returned detached."""
        with torch.autocast(self.device.type, dtype=torch.bfloat16):
            logits = self.net(x)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        if divisor != 1:
            loss = loss / divisor
        loss.backward()
        return loss.detach()

    @torch.no_grad()
    def evaluate(self) -> float:
        """Mean loss over the fixed validation batches (same batches every eval, every recipe)."""
        self.model.eval()
        total = 0.0
        for x, y in self.val:
            with torch.autocast(self.device.type, dtype=torch.bfloat16):
                logits = self.model(x)
            total += F.cross_entropy(logits.flatten(0, 1), y.flatten()).item()
        self.model.train()
        return total / len(self.val)

    # ------------------------------------------------------------------ the loop
    def fit(self) -> dict:
        """Run (or resume) to ``config.steps``; returns the last JSONL record."""
        threads = torch.get_num_threads()
        torch.set_num_threads(self._threads())
        try:
            with cpu_gemm_context(self.bf16_gemm):     # steps, evaluations, their backward
                return self._fit()
        finally:
            torch.set_num_threads(threads)

    def _threads(self) -> int:
        """CPU threads: ``config.threads``, else 1 for a quantized recipe on CPU, else torch's default.

        The reference quantizers are long chains of small elementwise ops; on small CPUs the
        intra-op thread hand-offs cost more than they save (measured: 2x faster on 1 of 2 cores).
        """
        if self.cfg.threads:
            return self.cfg.threads
        if self.device.type == "cpu" and self.recipe is not None:
            return 1
        return torch.get_num_threads()

    def _fit(self) -> dict:
        cfg = self.cfg
        self._start()
        self.model.train()
        bar = progress_bar(cfg, self.step) if self.is_writer else None
        tokens_per_step = cfg.batch_size * cfg.seq_len
        window = Window()
        record: dict = {}
        t_start, first = time.perf_counter(), self.step
        checks = {first, cfg.switch_step} if cfg.check_compile and self.compiled else set()
        sink_path = self.out / "metrics.jsonl" if self.is_writer else os.devnull
        with open(sink_path, "a", buffering=1) as sink:
            for s in range(self.step, cfg.steps):
                if s in checks:                            # outside the timed step
                    self._check_compile(s)
                t0 = time.perf_counter()
                loss, grad_norm, batch = self._train_step(s)
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                window.add(loss, tokens_per_step, time.perf_counter() - t0)
                if s == first and self.recipe is not None:    # which kernels actually ran (once)
                    from ..backend import explain
                    log.info("%s", explain(self.model))
                self.train_time += window.last_dt
                self.step = step = s + 1
                extra = self.monitor(step, self.model, batch) if self.monitor is not None else None
                last = step == cfg.steps
                if extra or last or step % cfg.log_every == 0 or step % cfg.eval_every == 0:
                    record = self._record(step, loss, grad_norm, window, tokens_per_step)
                    if last or step % cfg.eval_every == 0:
                        record["val_loss"] = self.evaluate()
                    record.update(extra or {})
                    sink.write(json.dumps(record) + "\n")
                    report_progress(bar, record, cfg)
                    window = Window()
                out_of_time = cfg.stop_after_s is not None and not last and \
                    time.perf_counter() - t_start >= cfg.stop_after_s
                if last or out_of_time or (cfg.ckpt_every and step % cfg.ckpt_every == 0):
                    self.save()
                if bar is not None:
                    bar.update(1)
                if out_of_time:
                    log.info("[%s] stopping at step %d/%d: the %.0f s budget is spent (checkpoint "
                             "written; continue with --resume)", cfg.recipe, step, cfg.steps, cfg.stop_after_s)
                    break
        if bar is not None:
            bar.close()
        self.finished = self.step >= cfg.steps
        return record

    def _check_compile(self, s: int) -> None:
        """``--check-compile``: step ``s``'s batch (its first micro-batch under grad_accum, which
        is what fits in memory) through the compiled blocks and eagerly, in step ``s``'s
        precision; stop on a fault rather than train on wrong gradients."""
        if self.schedule is not None:
            self.schedule.apply(self.model, s)
        x, y = (t.to(self.device).chunk(self.cfg.grad_accum)[0] for t in self._batch(s))
        faults, cosine = compiled_grad_check(self.model, self._loss_backward, x, y)
        if faults or cosine < 0.5:
            more = ", ..." if len(faults) > 4 else ""
            zeros = f"zero or no gradient for {len(faults)} parameters ({', '.join(faults[:4])}" \
                f"{more}) where eager's is nonzero; " if faults else ""
            raise RuntimeError(f"--check-compile at step {s}: the compiled blocks' gradients "
                               f"disagree with eager's: {zeros}cosine of the blocks' "
                               f"gradients {cosine:.3f}. "
                               "Train with --compile off and report this.")
        log.info("--check-compile at step %d: compiled and eager gradients agree (blocks' "
                 "cosine %.4f)", s, cosine)

    def _record(self, step: int, loss: float, grad_norm: float, window: "Window", tps: int) -> dict:
        tok_per_s = window.tokens / max(window.seconds, 1e-9)
        record = {"step": step, "loss": loss, "loss_avg": window.mean_loss, "tokens": step * tps,
                  "lr": lr_at(step - 1, self.cfg), "grad_norm": grad_norm, "tok_per_s": tok_per_s,
                  "mem_mb": _mem_mb(self.device), "time_s": self.train_time}
        if self.peak_flops:
            record["mfu"] = tok_per_s * self.flops_per_token / self.peak_flops
        return record

    def save(self) -> Path:
        state = {"sampler": self.sampler.state_dict(), "train_time": self.train_time,
                 "config": dataclasses.asdict(self.cfg)}
        return save_checkpoint(self.ckpt_dir, self.step, self.model, self.optimizer, state)
