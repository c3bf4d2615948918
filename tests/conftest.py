"""Shared pytest setup for microscale's test suite.

* ``@pytest.mark.gpu`` tests are skipped (with a reason) when CUDA is not available, so the
  CPU suite runs cleanly everywhere; ``@pytest.mark.slow`` marks longer CPU tests.
* Hypothesis gets a CI-sized profile: few examples, no deadline (the first call of a torch op
  can take longer than hypothesis' default deadline), derandomized so a run is reproducible.
* Fixtures give every test a fixed-seed torch generator and the full bf16 value set.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

try:
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "microscale", max_examples=40, deadline=None, derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    settings.load_profile("microscale")
except ImportError:  # hypothesis is a test extra; property tests import it themselves
    pass


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture
def gen() -> torch.Generator:
    """A CPU torch generator with a fixed seed (tests stay reproducible and independent)."""
    return torch.Generator().manual_seed(1234)


@pytest.fixture(scope="session")
def all_bf16() -> torch.Tensor:
    """Every bf16 bit pattern (65536 values, NaN and ±Inf included) as a bf16 tensor."""
    bits = np.arange(1 << 16, dtype=np.uint16).view(np.int16)
    return torch.from_numpy(bits.copy()).view(torch.bfloat16)


@pytest.fixture
def single_thread():
    """One intra-op thread for the test: the reference quantizers are chains of small ops, which
    run several times faster on one CPU thread than handed between threads (the harness makes
    the same choice for quantized recipes on CPU)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def dist_runs(tmp_path_factory) -> dict:
    """The multi-process checks of tests/dist_workers.py, run once: 2 gloo processes (every
    check, then a 2-rank FSDP2 harness run), then 3 (the checks that catch power-of-two
    assumptions, then the harness run resumed on 3 ranks and a NaN on one rank). Process start
    and ``import microscale`` dominate, hence two spawns for all of it. {world: [per-rank]}."""
    import os

    import dist_workers as W
    import torch.multiprocessing as mp
    base = tmp_path_factory.mktemp("dist")
    os.environ.update(MS_DIST_TMP=str(base), MS_DIST_PORT2=str(_free_port()))
    names = {2: ("ddp", "fsdp", "amax", "sr", "compile", "allgather", "fsdp_qag", "harness_train"),
             3: ("fsdp", "amax", "sr", "allgather", "fsdp_qag", "harness_resume")}
    runs = {"dir": base}
    for world, checks in names.items():
        out = base / f"world{world}"
        out.mkdir()
        mp.spawn(W.run, args=(world, _free_port(), str(out), checks), nprocs=world, join=True)
        runs[world] = [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(world)]
    return runs
