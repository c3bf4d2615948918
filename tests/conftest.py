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


def _scan_builtins_once() -> None:
    """Triton's interpreter, at every call of a ``@triton.jit`` helper, patches the builtins of
    ``tl``, ``tl.tensor`` and ``tl.math`` again, finding them with ``inspect.getmembers``
    (which lists and sorts every member), and our kernels call helpers tens of thousands of
    times a test (one NVFP4 test: 85 -> 74 s with this alone). The launch has patched
    them already, so those calls find nothing to patch. This keeps the names of each
    package's builtins from the first scan that finds any (a launch's, before anything is
    patched) and checks only those names after: the same members patched, the same way."""
    try:
        import inspect

        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return
    scan, patch_attr = getattr(interpreter, "_patch_builtin", None), \
        getattr(interpreter, "_patch_attr", None)
    if scan is None or patch_attr is None or list(inspect.signature(scan).parameters) != \
            ["pkg", "builder", "scope"]:
        return                          # another Triton: leave its interpreter as it is
    names: dict[int, list[str]] = {}

    def patch_builtin(pkg, builder, scope):
        if id(pkg) not in names:
            found = [n for n, m in inspect.getmembers(pkg) if tl.core.is_builtin(m)]
            if not found:               # already patched: nothing to do, nothing to keep
                return
            names[id(pkg)] = found
        for name in names[id(pkg)]:
            member = getattr(pkg, name)
            if tl.core.is_builtin(member):
                patch_attr(pkg, name, member, builder, scope)

    patch_builtin.triton_original = scan
    interpreter._patch_builtin = patch_builtin


_scan_builtins_once()


def _numpy_max_keep_nan() -> None:
    """The interpreter runs a ``tl.reduce`` whose combine function is not one of Triton's own
    element by element in Python (~0.1 ms an element): ``_utils.max_keep_nan``'s NaN-keeping
    maximum was about half of an NVFP4 pair test's time. Here that one combine function
    reduces with ``np.max``, which is the same fold (a NaN anywhere gives NaN, else the largest
    value; its inputs are absolute values, so no signed zeros to order); every other reduction
    is left to Triton."""
    try:
        import numpy as np
        from triton.runtime import interpreter

        from microscale.kernels._utils import _max_keep_nan
    except ImportError:
        return
    ops = getattr(interpreter, "ReduceOps", None)
    if ops is None or not hasattr(ops, "apply_impl") or not hasattr(ops, "min_max"):
        return                          # another Triton: leave its interpreter as it is
    apply_impl = ops.apply_impl

    def apply(self, input):
        if self.combine_fn is _max_keep_nan and len(input) == 1:
            return self.min_max(input[0], val_reduce_op=np.max)
        return apply_impl(self, input)

    apply.triton_original = apply_impl
    ops.apply_impl = apply


_numpy_max_keep_nan()

# The NVFP4 launch configs _interpreter_tiles changes, as configured for the GPU.
_GPU_CONFIGS: dict = {}


def _interpreter_tiles() -> None:
    """Under Triton's interpreter a launch costs about its op count per tile times its tiles
    (each op's numpy work is small at test sizes). The NVFP4 row kernel's GPU tiles are 4-8
    rows of 8-16 blocks and the register pass's 32-64 columns, so a test's input ran as tens
    of tiles. In the interpreter the row kernel's tiles take 64 rows and the register pass's
    128 columns: the same code paths at the same op count a tile, partial tiles kept where a
    test's shape leaves them. Every setting gives the same bits by design
    (``quant_nvfp4_config``); the GPU tests run the configured tiles compiled, and
    ``test_row_kernel_variants`` and ``test_nvfp4_reg_pass_exact`` run them here too
    (:func:`nvfp4_gpu_configs`)."""
    import os
    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    try:
        from microscale.kernels.quant_nvfp4_config import CONFIG
    except ImportError:                 # no Triton: nothing runs in the interpreter
        return
    _GPU_CONFIGS.update({k: CONFIG[k] for k in ("ROW1", "REG", "REG_ROW", "REG_COL")})
    row1 = CONFIG["ROW1"]
    CONFIG["ROW1"] = {**row1, "BR": 64, "SR_CODES": {**row1["SR_CODES"], "BR": 64}}
    for key in ("REG", "REG_ROW", "REG_COL"):
        CONFIG[key] = {**CONFIG[key], "BC": 128}


_interpreter_tiles()


@pytest.fixture
def nvfp4_gpu_configs() -> dict:
    """The NVFP4 launch configs (``quant_nvfp4.CONFIG`` entries) the suite's interpreter runs
    replace (:func:`_interpreter_tiles`), as configured for the GPU; empty where none was."""
    return dict(_GPU_CONFIGS)


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
