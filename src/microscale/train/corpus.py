"""The ``pysrc`` corpus: 100M+ distinct bytes of source text from what is installed, no download.

The built-in ``stdlib`` corpus (:mod:`.data`) holds ~30 MB, too little for runs of 100M tokens
without repeating data. ``pysrc`` extends it with the text sources of every installed package:

    roots      the stdlib directory (its site-packages excluded), then every site-packages
               directory of the interpreter (``site.getsitepackages()``, ``sysconfig``'s purelib
               and platlib), sorted by path; never the working tree or PYTHONPATH entries, so
               editing a repository does not change the corpus
    files      suffixes in :data:`SUFFIXES`: Python (.py, .pyi), C/C++/CUDA headers and sources
               (.h .hpp .cuh .c .cc .cpp .cu: torch and triton ship ~45 MB of headers) and prose
               (.md .rst). Left out: ``.txt`` (mostly data tables, word lists, licences and
               RECORD files), ``*.dist-info``/``*.egg-info`` metadata, files over 2 MB (generated
               tables), files holding a 0 byte (the end-of-document token) or invalid UTF-8
    order      (root index, relative path), byte-wise sorted: the same order on every machine that
               has the same files
    dedup      by SHA-256 of the content: a file identical to an earlier one (vendored copies,
               licences, empty ``__init__.py``) is skipped, so no text is trained on twice
    split      every 20th *kept* file goes to validation (as in ``stdlib``), the rest to training;
               each file is followed by a 0 byte
    cap        ``max_bytes`` stops after that many bytes (train + val); a corpus that ends before
               the cap is used whole and the shortfall is logged as a warning

The corpus depends on what is installed, so it always comes with its evidence, in the cache
next to the token files and copied next to a run's results by the paper driver:

    <key>.manifest.tsv   one line per file seen: split (train/val/dup/skip), bytes, the first 16
                         hex digits of its SHA-256, ``<root label>/<relative path>``
    <key>.json           roots, counts, bytes per split, and ``sha256``: the hash of the token
                         streams themselves (SHA-256 of "train:<sha of train>,val:<sha of val>")

Two machines trained on the same corpus iff their ``sha256`` agree. All files are written to a
temp file and ``os.replace``-d into place, the JSON last, so its presence marks a finished build;
the cache key covers the Python version, the roots, every file's path, size and mtime, the suffix
list and ``max_bytes``, so installing a package builds a new corpus rather than reusing a stale one.

Size (measured on the development machine, Python 3.11, torch 2.13 CPU, triton 3.6, numpy 2.x):
see ``docs/paper_reproduction.md``; the GPU image holds far more than the 100M bytes a run needs.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import site
import sys
import sysconfig
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["SUFFIXES", "CorpusInfo", "SourceFile", "list_sources", "pysrc_corpus", "source_roots"]

log = logging.getLogger(__name__)

SUFFIXES = (".py", ".pyi", ".h", ".hpp", ".cuh", ".c", ".cc", ".cpp", ".cu", ".md", ".rst")
MAX_FILE_BYTES = 2_000_000
_CACHE_VERSION = 1
_VAL_EVERY = 20
_EOD = b"\x00"
_SKIP_DIRS = {"__pycache__", ".git", "site-packages", "dist-packages", "microscale"}
_SKIP_DIR_SUFFIXES = (".dist-info", ".egg-info")


@dataclass(frozen=True)
class SourceFile:
    """One candidate file: ``label/rel`` names it in the manifest, ``path`` reads it."""

    label: str
    rel: str
    path: Path
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class CorpusInfo:
    """What a built corpus is: the hashes, counts and where its manifest lives."""

    sha256: str
    train_bytes: int
    val_bytes: int
    files: dict
    roots: list
    max_bytes: int | None
    manifest: str
    summary: str

    def describe(self) -> str:
        return (f"pysrc sha256 {self.sha256[:16]}: {self.files['train'] + self.files['val']:,} "
                f"distinct files ({self.files['dup']:,} duplicates and {self.files['skip']:,} "
                f"unusable skipped), {self.train_bytes + self.val_bytes:,} bytes")


def source_roots() -> list[tuple[str, Path]]:
    """``[(label, dir)]``: the stdlib first, then each site-packages directory sorted by path."""
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    site_dirs = set(site.getsitepackages()) if hasattr(site, "getsitepackages") else set()
    site_dirs |= {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    resolved = sorted({Path(p).resolve() for p in site_dirs if Path(p).is_dir()} - {stdlib})
    return [("stdlib", stdlib)] + [(f"site{i}", p) for i, p in enumerate(resolved)]


def _walk(label: str, root: Path, suffixes: tuple[str, ...]) -> list[SourceFile]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS and not d.endswith(_SKIP_DIR_SUFFIXES)
                       and not d.startswith("__editable__")]
        for name in filenames:
            if not name.endswith(suffixes) or name.startswith("__editable__"):
                continue
            path = Path(dirpath, name)
            try:
                st = path.stat()
            except OSError:                 # a dangling link: not part of the corpus
                continue
            if 0 < st.st_size <= MAX_FILE_BYTES:
                found.append(SourceFile(label, path.relative_to(root).as_posix(), path,
                                        st.st_size, st.st_mtime_ns))
    return sorted(found, key=lambda f: f.rel.encode())


def list_sources(roots: list[tuple[str, Path]] | None = None,
                 suffixes: tuple[str, ...] = SUFFIXES) -> list[SourceFile]:
    """Every candidate file in corpus order (root by root, byte-wise sorted relative paths)."""
    roots = source_roots() if roots is None else roots
    return [f for label, root in roots for f in _walk(label, Path(root), suffixes)]


def _cache_key(roots, files: list[SourceFile], max_bytes: int | None, suffixes) -> str:
    sig = hashlib.sha1(f"v{_CACHE_VERSION}|{sys.version}|{max_bytes}|{suffixes}".encode())
    for label, root in roots:
        sig.update(f"{label}={root};".encode())
    for f in files:
        sig.update(f"{f.label}/{f.rel}:{f.size}:{f.mtime_ns};".encode())
    return f"pysrc-py{sys.version_info.major}{sys.version_info.minor}-{sig.hexdigest()[:12]}"


class _Staged:
    """Files written under temp names in ``directory`` and renamed into place only by ``commit``."""

    def __init__(self, directory: Path, stack: ExitStack):
        self.dir, self.stack, self.pending = directory, stack, []
        directory.mkdir(parents=True, exist_ok=True)
        stack.callback(self._cleanup)

    def open(self, final: Path, mode: str = "wb"):
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=final.name + ".", suffix=".tmp")
        handle = self.stack.enter_context(os.fdopen(fd, mode))
        self.pending.append((handle, Path(tmp), final))
        return handle

    def commit(self) -> None:
        for handle, tmp, final in self.pending:     # in the order opened: the JSON last
            handle.flush()
            os.fsync(handle.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, final)
        self.pending = []

    def _cleanup(self) -> None:
        for _, tmp, _ in self.pending:
            tmp.unlink(missing_ok=True)


def _usable(blob: bytes) -> bool:
    if _EOD in blob:
        return False
    try:
        blob.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _build(files: list[SourceFile], roots, max_bytes: int | None, paths: dict) -> None:
    """Stream the kept files into the train/val token files; manifest and summary beside them."""
    seen, counts, total = set(), {"train": 0, "val": 0, "dup": 0, "skip": 0}, 0
    sizes, digests = {"train": 0, "val": 0}, {"train": hashlib.sha256(), "val": hashlib.sha256()}
    with ExitStack() as stack:
        staged = _Staged(paths["train"].parent, stack)
        sinks = {"val": staged.open(paths["val"]), "train": staged.open(paths["train"])}
        manifest = staged.open(paths["manifest"], "w")
        manifest.write("split\tbytes\tsha256_16\tfile\n")
        for f in files:
            if max_bytes is not None and total >= max_bytes:
                break
            blob = f.path.read_bytes()
            digest = hashlib.sha256(blob).hexdigest()
            if not _usable(blob):
                split = "skip"
            elif digest in seen:
                split = "dup"
            else:
                seen.add(digest)
                split = "val" if len(seen) % _VAL_EVERY == 0 else "train"
                data = (blob + _EOD)[: None if max_bytes is None else max_bytes - total]
                sinks[split].write(data)
                digests[split].update(data)
                sizes[split] += len(data)
                total += len(data)
            counts[split] += 1
            manifest.write(f"{split}\t{len(blob)}\t{digest[:16]}\t{f.label}/{f.rel}\n")
        train_sha, val_sha = digests["train"].hexdigest(), digests["val"].hexdigest()
        summary = {"sha256": hashlib.sha256(f"train:{train_sha},val:{val_sha}".encode()).hexdigest(),
                   "train_sha256": train_sha, "val_sha256": val_sha, "train_bytes": sizes["train"],
                   "val_bytes": sizes["val"], "files": counts, "max_bytes": max_bytes,
                   "roots": [[label, str(root)] for label, root in roots], "suffixes": list(SUFFIXES),
                   "max_file_bytes": MAX_FILE_BYTES, "python": sys.version.split()[0]}
        staged.open(paths["summary"], "w").write(json.dumps(summary, indent=1))
        staged.commit()


def pysrc_corpus(cache: str | os.PathLike | None = None, max_bytes: int | None = None,
                 roots: list[tuple[str, Path]] | None = None):
    """The ``pysrc`` corpus as :class:`~.data.TokenData` (``meta`` holds its :class:`CorpusInfo`)."""
    from .data import TokenData, cache_dir

    if max_bytes is not None and max_bytes < 1024:
        raise ValueError(f"max_bytes must be at least 1024, got {max_bytes}")
    roots = source_roots() if roots is None else [(label, Path(p)) for label, p in roots]
    files = list_sources(roots)
    if not files:
        raise RuntimeError(f"no source files found under {[str(r) for _, r in roots]}")
    key = _cache_key(roots, files, max_bytes, SUFFIXES)
    base = cache_dir(cache)
    paths = {"train": base / f"{key}.train.u8", "val": base / f"{key}.val.u8",
             "manifest": base / f"{key}.manifest.tsv", "summary": base / f"{key}.json"}
    if not all(p.exists() for p in paths.values()):
        log.info("building the pysrc corpus from %d candidate files under %d roots", len(files), len(roots))
        _build(files, roots, max_bytes, paths)
    summary = json.loads(paths["summary"].read_text())
    info = CorpusInfo(summary["sha256"], summary["train_bytes"], summary["val_bytes"], summary["files"],
                      summary["roots"], max_bytes, str(paths["manifest"]), str(paths["summary"]))
    if max_bytes is not None and info.train_bytes + info.val_bytes < max_bytes:
        log.warning("the pysrc corpus holds only %s bytes, fewer than the %s requested by max_bytes; "
                    "using all of it", f"{info.train_bytes + info.val_bytes:,}", f"{max_bytes:,}")
    if info.val_bytes == 0 or info.train_bytes == 0:
        raise ValueError(f"the pysrc corpus ({info.files}) is too small for a train/validation split: "
                         f"it needs {_VAL_EVERY} distinct files at least (raise max_bytes)")
    train = np.memmap(paths["train"], dtype=np.uint8, mode="r")
    val = np.memmap(paths["val"], dtype=np.uint8, mode="r")
    name = "pysrc" + (f"[:{max_bytes}]" if max_bytes else "")
    return TokenData(train, val, 256, name, meta=_meta(info))


def _meta(info: CorpusInfo) -> dict:
    return {"corpus": "pysrc", "sha256": info.sha256, "train_bytes": info.train_bytes,
            "val_bytes": info.val_bytes, "files": info.files, "roots": info.roots,
            "max_bytes": info.max_bytes, "manifest": info.manifest, "summary": info.summary,
            "describe": info.describe()}
