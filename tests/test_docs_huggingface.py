"""docs/huggingface.md: every section has Python, and all of it runs, in order, and asserts."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("compressed_tensors")

DOC = Path(__file__).resolve().parents[1] / "docs" / "huggingface.md"

pytestmark = pytest.mark.usefixtures("single_thread")


def sections() -> list[tuple[str, list[str]]]:
    """``(## heading, [python blocks])`` in document order."""
    out = []
    for part in re.split(r"^## ", DOC.read_text(), flags=re.M)[1:]:
        heading = part.splitlines()[0].strip()
        out.append((heading, re.findall(r"```python\n(.*?)```", part, flags=re.S)))
    return out


def test_every_section_has_code():
    found = sections()
    assert [h for h, _ in found][:3] == ["Convert a transformers model",
                                        "Which layers stay in high precision, and why",
                                        "Train with Trainer or a plain loop"]
    assert {h for h, blocks in found if not blocks} == set()


def test_the_page_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)                  # the page writes runs/ and serve/ relative
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the page asserts the warnings it expects
        for heading, blocks in sections():
            for i, code in enumerate(blocks):
                exec(compile(code, f"{DOC.name}: {heading} [{i}]", "exec"), namespace)
    assert "convert: 21 converted to nvfp4" in capsys.readouterr().out
    assert (tmp_path / "serve" / "llama-nvfp4" / "model.safetensors").is_file()
