"""Token data for the harness: a built-in corpus, text files and nanoGPT ``.bin`` files.

Built-in corpus ("stdlib"). Byte-level tokens (vocabulary 256) of the running interpreter's own
standard-library ``.py`` files (``sysconfig.get_paths()["stdlib"]``, ``site-packages`` excluded):
no download, ~30 MB of real, structured text on every machine with Python. Files are read in
sorted relative-path order, each followed by a 0 byte (never present in source text, so it
works as an end-of-document token). Split by file, deterministically: every 20th file (index
≡ 19 mod 20) goes to validation, the rest to training; a corpus too small for that (``max_bytes``
under 20 files) puts the last 5% of its bytes in validation. The two streams are cached as raw ``uint8`` files under
``$MICROSCALE_CACHE`` (default ``~/.cache/microscale``), written to a temp file and
``os.replace``-d into place, and opened as read-only ``np.memmap``s. The cache key covers the
Python version, the stdlib path, the file list's sizes and ``max_bytes``.

Larger corpus ("pysrc", :mod:`.corpus`): the stdlib plus the text sources of every installed
package, deduplicated by content hash, with a manifest and a content hash (100M+ bytes on a
typical GPU image). ``TokenData.meta`` carries its hash and manifest path.

User data. ``path.txt`` (any non-``.bin`` file): its raw bytes (vocab 256), last 5% = validation.
``path.bin``: nanoGPT-style flat ``uint16`` tokens; a sibling ``val.bin`` next to a ``train.bin``
is used as validation, otherwise the last 5%. A directory with ``train.bin``/``val.bin`` works too.

Sampling. Batch ``i`` of a run is a pure function of ``(seed, i)``: ``batch_size`` window starts
drawn by ``np.random.default_rng([seed, 0, i])``, each window ``seq_len + 1`` tokens (inputs and
next-token targets). So the sampler's whole state is the next index, every recipe in a
``compare`` sees the same batches in the same order, and a resumed run sees what an
uninterrupted one would. Validation uses a fixed set of batches drawn from ``(seed, 1, 0)``.
These random windows are drawn *with replacement*, so a long run sees some tokens twice; a run
asking for more tokens than the training split holds is warned about loudly.

``order="epoch"`` is the no-repetition sampler: the training split is cut into consecutive
windows of ``seq_len + 1`` tokens that overlap by one (each token is a target at most once), the
windows are permuted once by ``np.random.default_rng([seed, 2])``, and batch ``i`` takes windows
``i·B … (i+1)·B − 1`` of that permutation. One epoch at most: a run that needs more windows than
the split holds is refused before it starts (:meth:`BatchSampler.check_steps`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

__all__ = ["TokenData", "BatchSampler", "ORDERS", "load_data", "stdlib_corpus", "cache_dir"]

log = logging.getLogger(__name__)

_EOD = b"\x00"
_CACHE_VERSION = 2          # bump when the corpus layout or split changes
_VAL_EVERY = 20
_VAL_TAIL = 0.05
_EXCLUDE_DIRS = {"site-packages", "dist-packages", "__pycache__"}


@dataclass
class TokenData:
    """Train/validation token streams (1-D integer arrays, often memmaps) and their vocabulary."""

    train: np.ndarray
    val: np.ndarray
    vocab_size: int
    name: str
    meta: dict = field(default_factory=dict)      # e.g. the pysrc corpus's hash and manifest

    def describe(self) -> str:
        tag = f", sha256 {self.meta['sha256'][:16]}" if "sha256" in self.meta else ""
        return (f"{self.name}: {len(self.train):,} train / {len(self.val):,} val tokens, "
                f"vocab {self.vocab_size}{tag}")


def cache_dir(override: str | os.PathLike | None = None) -> Path:
    """Where corpora are cached: the argument, else ``$MICROSCALE_CACHE``, else ~/.cache/microscale."""
    root = override or os.environ.get("MICROSCALE_CACHE") or Path.home() / ".cache" / "microscale"
    return Path(root).expanduser()


def _stdlib_files() -> tuple[Path, list[Path]]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _EXCLUDE_DIRS)
        files += [Path(dirpath, f) for f in filenames if f.endswith(".py")]
    return root, sorted(files, key=lambda p: p.relative_to(root).as_posix())


def _atomic_write(path: Path, data: bytes | np.ndarray) -> None:
    """Write to a temp file in the same directory, then rename over ``path`` (readers never see half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.tobytes())
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)            # mkstemp makes 0600; a cache may be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _split_stdlib(files: list[Path], max_bytes: int | None) -> tuple[bytes, bytes]:
    """Concatenate (file bytes + EOD) in order, routing every 20th file to validation."""
    train, val, total = [], [], 0
    for i, path in enumerate(files):
        blob = path.read_bytes() + _EOD
        if max_bytes is not None and total + len(blob) > max_bytes:
            blob = blob[: max_bytes - total]
        (val if i % _VAL_EVERY == _VAL_EVERY - 1 else train).append(blob)
        total += len(blob)
        if max_bytes is not None and total >= max_bytes:
            break
    if not val:      # too few files for the every-20th rule (small max_bytes): the stream's tail
        stream = b"".join(train)
        cut = len(stream) - max(1, int(len(stream) * _VAL_TAIL))
        return stream[:cut], stream[cut:]
    return b"".join(train), b"".join(val)


def stdlib_corpus(cache: str | os.PathLike | None = None, max_bytes: int | None = None) -> TokenData:
    """The built-in corpus (see module docstring), built once and then memory-mapped from the cache."""
    if max_bytes is not None and max_bytes < 1024:
        raise ValueError(f"max_bytes must be at least 1024, got {max_bytes}")
    root, files = _stdlib_files()
    if not files:
        raise RuntimeError(f"no .py files found under the stdlib path {root}")
    sig = hashlib.sha1(f"v{_CACHE_VERSION}|{sys.version}|{root}|{max_bytes}".encode())
    for p in files:
        sig.update(f"{p.relative_to(root).as_posix()}:{p.stat().st_size};".encode())
    key = f"stdlib-py{sys.version_info.major}{sys.version_info.minor}-{sig.hexdigest()[:12]}"
    base = cache_dir(cache)
    train_path, val_path = base / f"{key}.train.u8", base / f"{key}.val.u8"
    if not (train_path.exists() and val_path.exists()):
        log.info("building the stdlib corpus from %d files under %s", len(files), root)
        train_b, val_b = _split_stdlib(files, max_bytes)
        _atomic_write(val_path, val_b)      # val first: train's presence marks a finished build
        _atomic_write(train_path, train_b)
    train = np.memmap(train_path, dtype=np.uint8, mode="r")
    val = np.memmap(val_path, dtype=np.uint8, mode="r")
    return TokenData(train, val, 256, "stdlib" + (f"[:{max_bytes}]" if max_bytes else ""))


def _tail_split(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    cut = len(tokens) - max(1, int(len(tokens) * _VAL_TAIL))
    return tokens[:cut], tokens[cut:]


def _bin_vocab(*arrays: np.ndarray) -> int:
    top = 0
    for a in arrays:
        for start in range(0, len(a), 1 << 24):     # chunked: .bin files can be many GB
            top = max(top, int(a[start:start + (1 << 24)].max()))
    return top + 1


def _load_bin(path: Path) -> TokenData:
    if path.is_dir():
        train_path, val_path = path / "train.bin", path / "val.bin"
    else:
        train_path, val_path = path, path.with_name("val.bin")
    if not train_path.exists():
        raise FileNotFoundError(f"token file not found: {train_path}")
    train = np.memmap(train_path, dtype=np.uint16, mode="r")
    if val_path.exists() and val_path != train_path:
        val = np.memmap(val_path, dtype=np.uint16, mode="r")
    else:
        train, val = _tail_split(train)
    return TokenData(train, val, _bin_vocab(train, val), str(path))


def load_data(spec: str | os.PathLike | None = None, cache: str | os.PathLike | None = None,
              max_bytes: int | None = None) -> TokenData:
    """``None``/``"stdlib"``: the built-in corpus; ``"pysrc"``: stdlib + installed packages' sources
    (:mod:`.corpus`); ``*.bin`` or a directory: uint16 tokens; else a text file."""
    if spec is None or str(spec) == "stdlib":
        return stdlib_corpus(cache, max_bytes)
    if str(spec) == "pysrc":
        from .corpus import pysrc_corpus
        return pysrc_corpus(cache, max_bytes)
    path = Path(spec).expanduser()
    if path.is_dir() or path.suffix == ".bin":
        data = _load_bin(path)
    elif path.is_file():
        raw = np.memmap(path, dtype=np.uint8, mode="r")
        train, val = _tail_split(raw[:max_bytes] if max_bytes else raw)
        data = TokenData(train, val, 256, str(path))
    else:
        raise FileNotFoundError(f"data file not found: {path}")
    if min(len(data.train), len(data.val)) < 2:
        raise ValueError(f"{path} holds too few tokens for a train/val split")
    return data


ORDERS = ("random", "epoch")


class BatchSampler:
    """Deterministic ``(inputs, targets)`` batches: batch ``i`` depends only on ``(seed, i)``.

    ``order="random"``: independent random windows (with replacement); ``"epoch"``: a fixed
    permutation of non-overlapping windows, at most one pass (see the module docstring).
    """

    def __init__(self, data: TokenData, batch_size: int, seq_len: int, seed: int = 0, order: str = "random"):
        if batch_size < 1 or seq_len < 1 or seed < 0:
            raise ValueError(f"batch_size and seq_len must be positive and seed non-negative, "
                             f"got {batch_size}, {seq_len}, {seed}")
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
        for split, tokens in (("train", data.train), ("val", data.val)):
            if len(tokens) < seq_len + 2:
                raise ValueError(f"the {split} split has {len(tokens)} tokens; seq_len {seq_len} needs "
                                 f"at least {seq_len + 2} (use a shorter --seq-len or more data)")
        self.data, self.batch_size, self.seq_len, self.seed = data, batch_size, seq_len, seed
        self.order, self.index, self._perm = order, 0, None

    @property
    def epoch_windows(self) -> int:
        """Non-overlapping training windows (``seq_len`` targets each) in one pass over the split."""
        return (len(self.data.train) - 1) // self.seq_len

    def check_steps(self, steps: int) -> None:
        """Refuse (``order="epoch"``) or warn about (``"random"``) a run that repeats training tokens."""
        need = steps * self.batch_size * self.seq_len
        have = self.epoch_windows * self.seq_len
        if need <= have:
            return
        what = (f"{steps} steps x {self.batch_size} x {self.seq_len} = {need:,} training tokens, but "
                f"{self.data.name} has {have:,} ({need / have:.2f} epochs)")
        if self.order == "epoch":
            raise ValueError(f"one epoch at most: {what}; use fewer --steps, a smaller batch or a "
                             f"larger corpus (--data pysrc, --max-bytes)")
        log.warning("REPEATED DATA: %s; random windows are drawn with replacement, so this run "
                    "trains on many tokens more than once (--order epoch refuses this)", what)

    def _windows(self, tokens: np.ndarray, rng: np.random.Generator) -> torch.Tensor:
        starts = rng.integers(0, len(tokens) - self.seq_len - 1, size=self.batch_size)
        return self._rows(tokens, starts)

    def _rows(self, tokens: np.ndarray, starts) -> torch.Tensor:
        rows = np.stack([np.asarray(tokens[s:s + self.seq_len + 1], dtype=np.int64) for s in starts])
        return torch.from_numpy(rows)

    def _epoch_starts(self, index: int) -> np.ndarray:
        if self._perm is None:
            self._perm = np.random.default_rng([self.seed, 2]).permutation(self.epoch_windows)
        lo, hi = index * self.batch_size, (index + 1) * self.batch_size
        if hi > len(self._perm):
            raise ValueError(f"batch {index} would start a second epoch of {self.data.name} "
                             f"({len(self._perm):,} windows of {self.seq_len} tokens)")
        return self._perm[lo:hi] * self.seq_len

    def batch(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Training batch ``index`` as int64 CPU tensors ``[B, T]`` (inputs, next-token targets)."""
        if self.order == "epoch":
            rows = self._rows(self.data.train, self._epoch_starts(index))
        else:
            rows = self._windows(self.data.train, np.random.default_rng([self.seed, 0, index]))
        return rows[:, :-1], rows[:, 1:]

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.batch(self.index)
        self.index += 1
        return out

    def val_batches(self, count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The fixed validation set: ``count`` batches, identical for every eval and every recipe."""
        rng = np.random.default_rng([self.seed, 1, 0])
        rows = [self._windows(self.data.val, rng) for _ in range(count)]
        return [(r[:, :-1], r[:, 1:]) for r in rows]

    def state_dict(self) -> dict:
        return {"index": self.index, "seed": self.seed, "batch_size": self.batch_size,
                "seq_len": self.seq_len, "order": self.order}

    def load_state_dict(self, state: dict) -> None:
        for key in ("seed", "batch_size", "seq_len", "order"):
            saved = state.get(key, "random" if key == "order" else None)
            if saved != getattr(self, key):
                raise ValueError(f"sampler {key} mismatch: checkpoint {saved}, run {getattr(self, key)}")
        self.index = int(state["index"])
