"""Load a repository script (``benchmarks/``, ``tools/``) as a module, so tests can call its
pure parts: ``load_script("tools/seq_layer.py")``. (tests/ is on sys.path.)"""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_script(relpath: str):
    """The module of ``ROOT / relpath``, executed fresh (its module-level state new)."""
    path = ROOT / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
