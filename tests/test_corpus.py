"""The pysrc corpus (dedup, order, split, manifest, hash, cap), the one-epoch sampler, the data
seed kept apart from the init seed, and a run stopped by its time budget then resumed."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from microscale.train import corpus as corpus_mod
from microscale.train.data import BatchSampler, TokenData, load_data
from microscale.train.trainer import TrainConfig, Trainer


@pytest.fixture
def warnings_log():
    """Warnings logged by microscale.train (the suite runs with ``-p no:logging``: no caplog)."""
    records = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logger = logging.getLogger("microscale.train")
    logger.addHandler(handler)
    yield lambda: " ".join(r.getMessage() for r in records)
    logger.removeHandler(handler)


def _tree(root):
    """A fake site-packages: 45 sources, a duplicate, a NUL file, bad UTF-8, and files to ignore."""
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    for i in range(45):
        (pkg / f"m{i:02d}.py").write_text(f"def f{i}(x):\n    return x * {i}  # " + "y" * (40 * i) + "\n")
    (pkg / "copy.py").write_text((pkg / "m03.py").read_text())             # same content: a dup
    (pkg / "nul.py").write_bytes(b"a = 1\x00\n")                          # holds the EOD byte
    (pkg / "latin.h").write_bytes(b"/* caf\xe9 */\n")                     # not UTF-8
    (pkg / "data.txt").write_text("ignored\n")                            # suffix not taken
    meta = root / "pkg-1.0.dist-info"
    meta.mkdir()
    (meta / "README.md").write_text("metadata\n")
    (root / "pkg" / "api.pyi").write_text("def g() -> int: ...\n")
    return [("site0", root)]


def test_pysrc_dedups_orders_splits_and_hashes(tmp_path):
    roots = _tree(tmp_path / "site")
    data = corpus_mod.pysrc_corpus(tmp_path / "c1", roots=roots)
    names = [f.rel for f in corpus_mod.list_sources(roots)]
    assert names == sorted(names, key=str.encode) and "pkg/data.txt" not in names
    assert not any("dist-info" in n for n in names) and "pkg/api.pyi" in names
    rows = [line.split("\t") for line in Path(data.meta["manifest"]).read_text().splitlines()[1:]]
    split = {r[3]: r[0] for r in rows}
    assert split["site0/pkg/m03.py"] == "dup"                     # copy.py sorts first and is kept
    assert split["site0/pkg/nul.py"] == split["site0/pkg/latin.h"] == "skip"
    kept = [r for r in rows if r[0] in ("train", "val")]
    assert [r[0] for r in kept].count("val") == len(kept) // 20 and kept[19][0] == "val"
    train = bytes(data.train)
    assert train.count(b"\x00") == [r[0] for r in kept].count("train")    # one EOD per file
    assert train.startswith((roots[0][1] / "pkg" / "api.pyi").read_bytes() + b"\x00")
    again = corpus_mod.pysrc_corpus(tmp_path / "c2", roots=roots)           # rebuilt elsewhere
    assert again.meta["sha256"] == data.meta["sha256"] and len(data.meta["sha256"]) == 64
    summary = json.loads(Path(data.meta["summary"]).read_text())
    assert summary["files"] == {"train": len(kept) - len(kept) // 20, "val": len(kept) // 20,
                                "dup": 1, "skip": 2}
    assert not list((tmp_path / "c1").glob("*.tmp"))                       # nothing half-written


def test_pysrc_cap_and_shortfall_warning(tmp_path, warnings_log):
    roots = _tree(tmp_path / "site")
    capped = corpus_mod.pysrc_corpus(tmp_path / "c", max_bytes=20_000, roots=roots)
    assert len(capped.train) + len(capped.val) == 20_000
    with pytest.raises(ValueError, match="too small for a train/validation split"):
        corpus_mod.pysrc_corpus(tmp_path / "c", max_bytes=4096, roots=roots)
    whole = corpus_mod.pysrc_corpus(tmp_path / "c", max_bytes=10**9, roots=roots)
    assert "fewer than the 1,000,000,000 requested" in warnings_log()
    assert whole.meta["train_bytes"] == len(whole.train) < 10**9


def test_pysrc_on_this_interpreter_is_large_and_named(tmp_path):
    """The real roots: the stdlib first; capped so the test stays fast."""
    roots = corpus_mod.source_roots()
    assert roots[0][0] == "stdlib" and all(label.startswith("site") for label, _ in roots[1:])
    data = load_data("pysrc", tmp_path, max_bytes=2_000_000)
    assert data.name == "pysrc[:2000000]" and "sha256" in data.describe()


def _tokens(n=20_000, seed=0):
    rng = np.random.default_rng(seed)
    return TokenData(rng.integers(0, 256, n, dtype=np.uint8), rng.integers(0, 256, 2000, dtype=np.uint8),
                     256, "rand")


def test_epoch_order_never_repeats_a_target_and_refuses_a_second_epoch(warnings_log):
    data = _tokens()
    s = BatchSampler(data, batch_size=4, seq_len=50, seed=3, order="epoch")
    assert s.epoch_windows == (20_000 - 1) // 50
    starts = np.concatenate([s._epoch_starts(i) for i in range(s.epoch_windows // 4)])
    assert len(set(starts.tolist())) == len(starts) and np.all(starts % 50 == 0)
    x, y = s.batch(0)
    assert torch.equal(torch.from_numpy(data.train[starts[0]:starts[0] + 50].astype(np.int64)), x[0])
    assert torch.equal(x[:, 1:], y[:, :-1])
    s.check_steps(s.epoch_windows // 4)
    with pytest.raises(ValueError, match="one epoch at most"):
        s.check_steps(s.epoch_windows // 4 + 1)
    with pytest.raises(ValueError, match="second epoch"):
        s.batch(s.epoch_windows // 4 + 1)
    BatchSampler(data, 4, 50, order="random").check_steps(1000)
    assert "REPEATED DATA" in warnings_log()
    same = BatchSampler(data, 4, 50, seed=3, order="epoch")
    assert torch.equal(same.batch(7)[0], s.batch(7)[0])
    with pytest.raises(ValueError, match="order mismatch"):
        BatchSampler(data, 4, 50, seed=3).load_state_dict(s.state_dict())


def _cfg(out, **kw) -> TrainConfig:
    base = {"model": "micro", "steps": 6, "batch_size": 2, "seq_len": 32, "eval_every": 3, "eval_batches": 1,
            "ckpt_every": 0, "out": str(out), "device": "cpu", "progress": False, "order": "epoch"}
    return TrainConfig(**(base | kw))


def test_seed_changes_the_init_but_data_seed_fixes_the_batches(tmp_path):
    data = _tokens()
    a = Trainer(_cfg(tmp_path / "a", seed=0, data_seed=0), data=data)
    b = Trainer(_cfg(tmp_path / "b", seed=1, data_seed=0), data=data)
    c = Trainer(_cfg(tmp_path / "c", seed=1), data=data)                      # data_seed = seed
    assert torch.equal(a.sampler.batch(2)[0], b.sampler.batch(2)[0])
    assert not torch.equal(a.sampler.batch(2)[0], c.sampler.batch(2)[0])
    assert all(torch.equal(x, y) for (x, _), (y, _) in zip(a.val, b.val))
    assert not torch.equal(a.model.tok_emb.weight, b.model.tok_emb.weight)


def test_stop_after_checkpoints_then_resume_finishes(tmp_path):
    data = _tokens()
    out = tmp_path / "run"
    first = Trainer(_cfg(out, stop_after_s=0.0), data=data)
    first.fit()
    assert not first.finished and first.step == 1
    assert min(p.name for p in (out / "checkpoints").iterdir()) == "step_000001.json"
    second = Trainer(_cfg(out, resume=True), data=data)
    second.fit()
    assert second.finished and second.step == 6
    with pytest.raises(ValueError, match="order"):
        Trainer(_cfg(out, resume=True, steps=8, order="random"), data=data).fit()
