"""The CLI on a base install (no extras), --version, py.typed in the wheel, and checkpoints that
survive: a damaged newest checkpoint falls back to an intact one, --out naming a file and a
full disk give one-line errors and leave the previous checkpoint intact."""

from __future__ import annotations

import errno
import importlib.util
import logging
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import microscale
from microscale.train import checkpoint as ckpt_mod
from microscale.train.cli import main

MAX_BYTES = 200_000
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("corpus")


@pytest.fixture(autouse=True)
def fresh_root_logger():
    """main() calls logging.basicConfig, which binds the root logger to this test's stderr."""
    handlers = logging.root.handlers[:]
    yield
    logging.root.handlers[:] = handlers


@pytest.fixture
def said():
    """Messages the microscale loggers emit at INFO and above during the test."""
    messages: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: messages.append(record.getMessage())
    logger = logging.getLogger("microscale")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield messages
    logger.removeHandler(handler)
    logger.setLevel(level)


def _train(out, cache, *extra, steps=4):
    return main(["train", "--recipe", "nvfp4", "--model", "micro", "--steps", str(steps),
                 "--batch-size", "2", "--seq-len", "32", "--ckpt-every", "2", "--eval-every",
                 "100", "--max-bytes", str(MAX_BYTES), "--cache-dir", str(cache), "--out",
                 str(out), "--device", "cpu", "--no-progress", *extra])


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("microscale: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ---------------------------------------------------------------------------- packaging
def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == \
        f"microscale {microscale.__version__}"


def test_base_install_help_and_one_line_hint(monkeypatch, capsys, tmp_path):
    for name in ("safetensors", "matplotlib", "tqdm"):        # what microscale[train] adds
        monkeypatch.setitem(sys.modules, name, None)
    for name in [m for m in sys.modules if m.startswith("microscale.train.")
                 and m.rsplit(".", 1)[-1] in ("checkpoint", "trainer", "plots")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0 and "train" in capsys.readouterr().out
    assert _train(tmp_path / "run", tmp_path) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "needs safetensors" in line and "microscale[train]" in line


def test_core_import_stays_light():
    """import microscale, convert and reach the integrations: transformers is never imported."""
    code = ("import sys, torch, microscale as ms\n"
            "model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Linear(32, 32))\n"
            "ms.convert(model, 'mxfp8')\n"
            "assert callable(ms.integrations.transformers.from_pretrained)\n"
            "assert callable(ms.export)\n"
            "heavy = {'transformers', 'compressed_tensors', 'safetensors', 'matplotlib'}\n"
            "print(sorted(heavy & set(sys.modules)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.skipif(importlib.util.find_spec("setuptools") is None, reason="needs setuptools")
def test_wheel_ships_py_typed(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__",
                                                                            "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps",
                    "--no-build-isolation", "-q", "-w", str(tmp_path / "dist")], check=True,
                   capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("microscale-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "microscale/py.typed" in names and "microscale/integrations/export.py" in names


# ---------------------------------------------------------------------------- checkpoints
def test_resume_falls_back_past_a_damaged_checkpoint(tmp_path, cache, said):
    out = tmp_path / "run"
    assert _train(out, cache, steps=4) == 0
    ckpts = out / "checkpoints"
    newest = ckpts / "step_000004.safetensors"
    data = newest.read_bytes()
    newest.write_bytes(data[: len(data) // 2])                   # truncated copy
    assert ckpt_mod.latest_checkpoint(ckpts) == ckpts / "step_000002.json"
    said.clear()
    assert _train(out, cache, "--resume", steps=6) == 0
    text = "\n".join(said)
    assert "step_000004.json is unusable" in text and "truncated" in text
    assert "resumed from" in text and "step_000002.json at step 2" in text
    flipped = bytearray((ckpts / "step_000006.safetensors").read_bytes())
    flipped[-5] ^= 0xFF                                          # same size, one byte damaged
    (ckpts / "step_000006.safetensors").write_bytes(bytes(flipped))
    assert "SHA-256" in ckpt_mod.checkpoint_problem(ckpts / "step_000006.json")
    assert ckpt_mod.latest_checkpoint(ckpts) == ckpts / "step_000004.json"


def test_resume_refuses_when_every_checkpoint_is_damaged(tmp_path, cache, capsys):
    out = tmp_path / "run"
    assert _train(out, cache, steps=4) == 0
    for f in (out / "checkpoints").glob("*.safetensors"):
        f.write_bytes(b"\0" * 16)
    capsys.readouterr()
    assert _train(out, cache, "--resume", steps=6) == 2
    assert "no intact checkpoint" in _one_error_line(capsys.readouterr().err)
    assert len(list((out / "checkpoints").glob("*.safetensors"))) == 2     # not deleted


def test_out_naming_a_file_is_one_line(tmp_path, cache, capsys):
    target = tmp_path / "taken"
    target.write_text("not a directory")
    assert _train(target, cache) == 2
    assert "is an existing file, not a directory" in _one_error_line(capsys.readouterr().err)
    assert _train(target / "sub", cache) == 2
    assert "taken is an existing file" in _one_error_line(capsys.readouterr().err)
    assert target.read_text() == "not a directory"


def test_full_disk_is_one_line_and_keeps_the_previous_checkpoint(tmp_path, cache, capsys,
                                                                 monkeypatch):
    out = tmp_path / "run"
    real = ckpt_mod.save_file
    calls = []

    def fill_up(tensors, path):
        calls.append(path)
        if len(calls) == 2:                                      # the step-4 checkpoint
            Path(path).write_bytes(b"partial")
            raise OSError(errno.ENOSPC, "No space left on device", path)
        return real(tensors, path)

    monkeypatch.setattr(ckpt_mod, "save_file", fill_up)
    assert _train(out, cache, steps=4) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert "could not write the step 4 checkpoint" in line and "no space left" in line
    assert "step_000002.json is intact" in line
    ckpts = out / "checkpoints"
    assert sorted(p.name for p in ckpts.iterdir()) == ["step_000002.json",
                                                       "step_000002.safetensors"]
    assert ckpt_mod.checkpoint_problem(ckpts / "step_000002.json") is None
