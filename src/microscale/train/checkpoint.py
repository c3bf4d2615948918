"""Checkpoints that resume a run exactly: tensors in safetensors, everything else in JSON.

One checkpoint is two files in ``<run>/checkpoints/``::

    step_000200.safetensors   model.<name>        model state (tied tensors stored once)
                              optim.state.<i>.<k> optimizer state (AdamW exp_avg, exp_avg_sq, step)
                              gen.<module>.<attr> state of any torch.Generator a layer owns (SR bits)
    step_000200.json          step, RNG states (torch CPU/CUDA, numpy, python), sampler state,
                              run config, and the skeletons of the model and optimizer state
                              dicts: their non-tensor parts (param groups, a quantized layer's
                              ``_extra_state`` recipe) with ``{"__tensor__": key}`` placeholders

Each file is written to a temp file in the same directory and ``os.replace``-d into place, the
JSON last, so a JSON's presence means its checkpoint is complete. The JSON also records the
size and SHA-256 of its safetensors file, so a checkpoint damaged later (a truncated copy, a
disk error) is recognised: :func:`latest_checkpoint` picks the highest step that is *intact*,
logging each newer one it skips and why, and :func:`resume_point` refuses (rather than start
over) when checkpoints exist but none is intact. A write that fails (a full disk) raises
:class:`CheckpointWriteError`, an ``OSError`` whose one-line message names the previous
checkpoint, which is left intact; the temp file is removed. The RNG states are captured *after* everything a step does
(update, logging, eval), so a resumed run draws exactly the random numbers an uninterrupted
one would: identical losses, bit for bit, on the same device and thread count.

Loading is all-or-nothing: :func:`load_checkpoint` reads and checks everything it will apply
first (the JSON and its keys, every tensor it names, the model's keys, shapes and dtypes, each
quantized layer's ``_extra_state``, the optimizer's groups, every generator and RNG state, by
applying it to a scratch generator), and only then touches the model, optimizer and RNGs. A
damaged or mismatched file raises a ``ValueError`` naming the entry and leaves the process
exactly as it was (the checks: ``checkpoint_checks.py``).
"""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import logging
import os
import random
import re
import tempfile
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

__all__ = ["save_checkpoint", "load_checkpoint", "latest_checkpoint", "resume_point", "rng_state",
           "set_rng_state", "atomic_write_text", "CheckpointWriteError", "CorruptCheckpointError"]

log = logging.getLogger(__name__)

_NAME = re.compile(r"^step_(\d{6,})\.json$")


class CheckpointWriteError(OSError):
    """Writing a checkpoint failed (disk full, permissions); earlier checkpoints are intact."""


class CorruptCheckpointError(ValueError):
    """A checkpoint's files are truncated, damaged or missing."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` via a temp file + ``os.replace`` (never a torn file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _b64(t: torch.Tensor) -> str:
    return base64.b64encode(t.cpu().numpy().tobytes()).decode("ascii")


def _unb64(s: str) -> torch.Tensor:
    return torch.frombuffer(bytearray(base64.b64decode(s)), dtype=torch.uint8)


def rng_state() -> dict:
    """Every global RNG a training step may draw from, as JSON-able values."""
    np_state = np.random.get_state()
    py_state = random.getstate()
    state = {
        "torch_cpu": _b64(torch.get_rng_state()),
        "numpy": [np_state[0], np_state[1].tolist(), *np_state[2:]],
        "python": [py_state[0], list(py_state[1]), py_state[2]],
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["torch_cuda"] = [_b64(s) for s in torch.cuda.get_rng_state_all()]
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(_unb64(state["torch_cpu"]))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))
    if "torch_cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([_unb64(s) for s in state["torch_cuda"]])


def _generators(model: torch.nn.Module) -> dict[str, torch.Generator]:
    """Per-layer generators (e.g. a quantized layer's stochastic-rounding stream), by dotted name."""
    found = {}
    for mod_name, module in model.named_modules():
        for attr, value in vars(module).items():
            if isinstance(value, torch.Generator):
                found[f"{mod_name}.{attr}" if mod_name else attr] = value
    return found


def _pack(obj, key: str, tensors: dict, seen: dict):
    """Nested state -> JSON-able skeleton; tensors go to ``tensors[key]`` (shared ones stored once).

    Handles what ``state_dict()`` s hold: tensors, dicts with any keys (``_extra_state``,
    optimizer slots keyed by int), lists, tuples and JSON scalars.
    """
    if isinstance(obj, torch.Tensor):
        if obj.numel():
            ident = (obj.untyped_storage().data_ptr(), obj.storage_offset(), tuple(obj.shape),
                     obj.stride(), obj.dtype)
            if ident in seen:
                return {"__tensor__": seen[ident]}
            seen[ident] = key
        tensors[key] = obj.detach().contiguous()
        return {"__tensor__": key}
    if isinstance(obj, dict):
        return {"__dict__": [[k, _pack(v, f"{key}.{k}", tensors, seen)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        items = [_pack(v, f"{key}.{i}", tensors, seen) for i, v in enumerate(obj)]
        return {"__tuple__": items} if isinstance(obj, tuple) else items
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"cannot checkpoint {key}: unsupported type {type(obj).__name__}")


def _unpack(obj, tensors: dict):
    if isinstance(obj, list):
        return [_unpack(v, tensors) for v in obj]
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return tensors[obj["__tensor__"]]
        if "__tuple__" in obj:
            return tuple(_unpack(v, tensors) for v in obj["__tuple__"])
        return {k: _unpack(v, tensors) for k, v in obj["__dict__"]}
    return obj


def save_checkpoint(ckpt_dir: str | os.PathLike, step: int, model: torch.nn.Module,
                    optimizer: torch.optim.Optimizer, state: dict, keep: int = 2) -> Path:
    """Write checkpoint ``step`` atomically; ``state`` (sampler, config, ...) goes to the JSON.

    Keeps the newest ``keep`` checkpoints. Returns the JSON path.
    """
    ckpt_dir = Path(ckpt_dir)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    tensors, seen = {}, {}
    model_meta = _pack(model.state_dict(), "model", tensors, seen)
    optim_meta = _pack(optimizer.state_dict(), "optim", tensors, seen)
    tensors |= {f"gen.{k}": g.get_state() for k, g in _generators(model).items()}
    weights = ckpt_dir / f"step_{step:06d}.safetensors"
    meta_path = ckpt_dir / f"step_{step:06d}.json"
    try:
        digest, size = _write_weights(tensors, weights)
        meta = {"step": step, "weights": weights.name, "weights_bytes": size,
                "weights_sha256": digest, "model": model_meta, "optimizer": optim_meta,
                "rng": rng_state(), **state}
        atomic_write_text(meta_path, json.dumps(meta))
    except (OSError, SafetensorError) as err:
        raise _write_error(err, step, ckpt_dir) from err
    _prune(ckpt_dir, keep)
    return meta_path


def _write_weights(tensors: dict, weights: Path) -> tuple[str, int]:
    """Write via a temp file; returns the file's SHA-256 and size (read back from disk)."""
    fd, tmp = tempfile.mkstemp(dir=weights.parent, prefix=weights.name + ".", suffix=".tmp")
    os.close(fd)
    try:
        save_file({k: v.cpu() for k, v in tensors.items()}, tmp)
        digest, size = _sha256(Path(tmp)), os.path.getsize(tmp)
        os.replace(tmp, weights)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return digest, size


def _write_error(err: Exception, step: int, ckpt_dir: Path) -> CheckpointWriteError:
    no_space = getattr(err, "errno", None) == errno.ENOSPC or "No space left" in str(err)
    reason = "no space left on device" if no_space else (getattr(err, "strerror", None) or str(err))
    previous = latest_checkpoint(ckpt_dir, quiet=True)
    kept = f"the previous checkpoint {previous} is intact" if previous else \
        "no earlier checkpoint exists"
    return CheckpointWriteError(getattr(err, "errno", None) or errno.EIO,
                                f"could not write the step {step} checkpoint in {ckpt_dir}: "
                                f"{reason}; {kept}")


def _checkpoints(ckpt_dir: Path) -> list[tuple[int, Path]]:
    if not ckpt_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in ckpt_dir.iterdir() if (m := _NAME.match(p.name))]
    return sorted(found)


def _prune(ckpt_dir: Path, keep: int) -> None:
    for _, meta_path in _checkpoints(ckpt_dir)[:-keep] if keep > 0 else []:
        meta_path.unlink(missing_ok=True)                        # JSON first: never a JSON without tensors
        meta_path.with_suffix(".safetensors").unlink(missing_ok=True)


def checkpoint_problem(meta_path: str | os.PathLike) -> str | None:
    """Why the checkpoint ``meta_path`` cannot be loaded, or None when it is intact."""
    meta_path = Path(meta_path)
    try:
        meta = json.loads(meta_path.read_text())
        weights = meta_path.with_name(meta["weights"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        return f"its JSON is unreadable ({type(err).__name__})"
    if not weights.is_file():
        return f"{weights.name} is missing"
    size = weights.stat().st_size
    if "weights_bytes" in meta and size != meta["weights_bytes"]:
        return f"{weights.name} is truncated ({size} of {meta['weights_bytes']} bytes)"
    if "weights_sha256" in meta:
        return None if _sha256(weights) == meta["weights_sha256"] else \
            f"{weights.name} is corrupt (SHA-256 mismatch)"
    try:                                  # checkpoints from before the checksum: the header
        with safe_open(str(weights), "pt"):
            return None
    except (SafetensorError, OSError) as err:
        return f"{weights.name} is not a valid safetensors file ({err})"


def latest_checkpoint(ckpt_dir: str | os.PathLike, *, quiet: bool = False) -> Path | None:
    """JSON path of the newest intact checkpoint in ``ckpt_dir``, or None; each newer one that is
    damaged is skipped with a logged warning (unless ``quiet``)."""
    for _, meta_path in reversed(_checkpoints(Path(ckpt_dir))):
        problem = checkpoint_problem(meta_path)
        if problem is None:
            return meta_path
        if not quiet:
            log.warning("checkpoint %s is unusable: %s; falling back to an older one",
                        meta_path.name, problem)
    return None


def resume_point(ckpt_dir: str | os.PathLike) -> Path | None:
    """:func:`latest_checkpoint` for a resume: None when there is no checkpoint at all, an error
    when there are some but none is intact (a fresh start would delete them)."""
    found = latest_checkpoint(ckpt_dir)
    if found is None and _checkpoints(Path(ckpt_dir)):
        names = ", ".join(p.name for _, p in _checkpoints(Path(ckpt_dir)))
        raise CorruptCheckpointError(f"--resume: no intact checkpoint in {ckpt_dir} ({names} are "
                                     "all damaged, see above); move them away to start over")
    if found is not None:
        log.info("resuming from %s", found)
    return found


def load_checkpoint(meta_path: str | os.PathLike, model: torch.nn.Module,
                    optimizer: torch.optim.Optimizer | None = None, restore_rng: bool = True) -> dict:
    """Load model (+ optimizer, generators, global RNGs) from a checkpoint JSON; returns the JSON.

    Everything is validated before anything is applied (see the module docstring).
    """
    from .checkpoint_checks import (_check_model_state, _check_optimizer_state,
                                    _check_rng_state, _checked_generator_states, _read,
                                    _unpack_checked)
    meta_path = Path(meta_path)
    meta, tensors = _read(meta_path, need_optimizer=optimizer is not None)
    where = f"checkpoint {meta_path.name}"
    model_sd = _unpack_checked(meta["model"], tensors, where, "model")
    _check_model_state(model, model_sd, where)
    optim_sd = None
    if optimizer is not None:
        optim_sd = _unpack_checked(meta["optimizer"], tensors, where, "optimizer")
        _check_optimizer_state(optimizer, optim_sd, where)
    gen_states = _checked_generator_states(model, tensors, where)
    if restore_rng:
        _check_rng_state(meta["rng"], where)
    # ---- nothing above changed any state; apply
    model.load_state_dict(model_sd, strict=True)
    for gen, state in gen_states:
        gen.set_state(state)
    if optimizer is not None:
        optimizer.load_state_dict(optim_sd)
    if restore_rng:
        set_rng_state(meta["rng"])
    log.info("loaded checkpoint %s (step %d)", meta_path, meta["step"])
    return meta
