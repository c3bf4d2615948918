"""Harness data: the built-in stdlib corpus (cache, split, determinism), user files, the sampler."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from microscale.train import data as data_mod
from microscale.train.data import BatchSampler, TokenData, cache_dir, load_data, stdlib_corpus

MAX = 150_000


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def test_stdlib_corpus_is_python_source_split_by_file(cache):
    corpus = stdlib_corpus(cache, max_bytes=MAX)
    assert corpus.vocab_size == 256 and corpus.train.dtype == np.uint8
    assert len(corpus.train) + len(corpus.val) == MAX and len(corpus.val) > 0
    train = bytes(corpus.train)
    assert b"import " in train and b"def " in train
    # file boundaries are 0 bytes; the split follows the sorted file list (every 20th file to val)
    _, files = data_mod._stdlib_files()
    blobs = [p.read_bytes() + b"\x00" for p in files]
    assert train.startswith(blobs[0] + blobs[1])
    assert all(b"\x00" not in b[:-1] for b in blobs[:50])


def test_stdlib_corpus_is_cached_atomically_and_reused(cache, monkeypatch):
    first = stdlib_corpus(cache, max_bytes=MAX)
    files = sorted(p.name for p in cache.iterdir())
    assert len(files) == 2 and all(name.endswith(".u8") for name in files)   # no temp files left
    assert all(oct(os.stat(cache / f).st_mode)[-3:] == "644" for f in files)

    def no_rebuild(*args):
        raise AssertionError("the cached corpus was rebuilt")

    monkeypatch.setattr(data_mod, "_split_stdlib", no_rebuild)
    again = stdlib_corpus(cache, max_bytes=MAX)
    assert isinstance(again.train, np.memmap)
    np.testing.assert_array_equal(np.asarray(first.train), np.asarray(again.train))


def test_cache_dir_resolution(tmp_path, monkeypatch):
    monkeypatch.setenv("MICROSCALE_CACHE", str(tmp_path / "env"))
    assert cache_dir() == tmp_path / "env"
    assert cache_dir(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv("MICROSCALE_CACHE")
    assert cache_dir().parts[-2:] == (".cache", "microscale")


def test_load_data_text_file_tail_split(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_bytes(bytes(range(256)) * 40)
    data = load_data(path)
    assert data.vocab_size == 256 and len(data.train) + len(data.val) == 256 * 40
    assert bytes(data.val) == path.read_bytes()[len(data.train):]
    assert len(data.val) == int(256 * 40 * 0.05)


def test_load_data_bin_tokens(tmp_path):
    tokens = (np.arange(5000) * 37 % 1000).astype(np.uint16)
    tokens.tofile(tmp_path / "train.bin")
    single = load_data(tmp_path / "train.bin")          # no val.bin: last 5%
    assert single.vocab_size == 1000 and len(single.val) == 250
    np.testing.assert_array_equal(single.train, tokens[:4750])
    (tokens[:300] + 2000).astype(np.uint16).tofile(tmp_path / "val.bin")
    for spec in (tmp_path / "train.bin", tmp_path):        # sibling val.bin, or the directory
        both = load_data(spec)
        assert len(both.train) == 5000 and len(both.val) == 300
        assert both.vocab_size == int(tokens[:300].max()) + 2000 + 1


def test_load_data_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        load_data(tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="max_bytes"):
        stdlib_corpus(tmp_path, max_bytes=10)
    tiny = TokenData(np.zeros(50, np.uint8), np.zeros(50, np.uint8), 256, "t")
    with pytest.raises(ValueError, match="seq_len"):
        BatchSampler(tiny, 2, 64)


def _toy() -> TokenData:
    return TokenData(np.arange(10_000, dtype=np.uint16) % 251, (np.arange(3000, dtype=np.uint16) * 7) % 251, 251, "toy")


def test_sampler_is_a_pure_function_of_seed_and_index():
    data = _toy()
    a, b = BatchSampler(data, 4, 32, seed=3), BatchSampler(data, 4, 32, seed=3)
    seq_a = [a.next() for _ in range(5)]
    x4, y4 = b.batch(4)                                   # random access == sequential order
    torch.testing.assert_close(x4, seq_a[4][0], rtol=0, atol=0)
    torch.testing.assert_close(y4, seq_a[4][1], rtol=0, atol=0)
    assert a.index == 5 and x4.dtype == torch.int64 and x4.shape == (4, 32)
    other = BatchSampler(data, 4, 32, seed=4).batch(4)[0]
    assert not torch.equal(other, x4)
    assert not torch.equal(seq_a[0][0], seq_a[1][0])


def test_sampler_targets_are_next_tokens_from_the_stream():
    data = _toy()
    x, y = BatchSampler(data, 8, 16, seed=0).batch(0)
    torch.testing.assert_close(x[:, 1:], y[:, :-1], rtol=0, atol=0)
    stream = torch.from_numpy(data.train.astype(np.int64))
    for row_x, row_y in zip(x, y):
        start = int(row_x[0])                # the toy stream's value at i is i % 251 ...
        hits = [s for s in range(start, len(stream) - 16, 251) if torch.equal(stream[s:s + 16], row_x)]
        assert hits and torch.equal(stream[hits[0] + 1:hits[0] + 17], row_y)


def test_val_batches_are_fixed_and_from_the_val_split():
    data = _toy()
    s = BatchSampler(data, 2, 16, seed=1)
    first, second = s.val_batches(3), s.val_batches(3)
    assert len(first) == 3
    for (xa, _), (xb, _) in zip(first, second):
        torch.testing.assert_close(xa, xb, rtol=0, atol=0)
    val_values = set(np.unique(data.val).tolist())
    assert set(first[0][0].unique().tolist()) <= val_values


def test_sampler_state_round_trip_and_mismatch():
    data = _toy()
    s = BatchSampler(data, 2, 16, seed=1)
    s.next()
    s.next()
    t = BatchSampler(data, 2, 16, seed=1)
    t.load_state_dict(s.state_dict())
    assert t.index == 2
    with pytest.raises(ValueError, match="seed"):
        BatchSampler(data, 2, 16, seed=2).load_state_dict(s.state_dict())
