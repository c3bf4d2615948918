"""Shared pytest setup for microscale's test suite.

* ``@pytest.mark.gpu`` tests are skipped (with a reason) when CUDA is not available, so the
  CPU suite runs cleanly everywhere; ``@pytest.mark.slow`` marks the CPU tests that take
  ~15 s or more (``-m "not gpu and not slow"``: a quick run), which run first.
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


def _overflow_check_only_when_asserted() -> None:
    """Each signed integer ``+``, ``-`` and ``*`` in a kernel gets an overflow check from Triton's
    front end: both operands cast to int64, the op again, two comparisons, an ``and``, then
    ``device_assert``. That assert does nothing unless the kernel runs with ``debug`` on
    (``TRITON_DEBUG=1``), and the interpreter's default is off, so the check is built and
    dropped, at a third of an MXFP4 pair test's time (~10 interpreted ops per index op).
    Here it is built only when its assert would act: with ``debug`` on it runs as before."""
    try:
        from triton.language.semantic import TritonSemantic
    except ImportError:
        return
    check = getattr(TritonSemantic, "binary_op_sanitize_overflow_impl", None)
    if check is None or not hasattr(TritonSemantic, "device_assert"):
        return                          # another Triton: leave its front end as it is

    def sanitize_when_asserted(self, lhs, rhs, binary_op):
        if not self.builder.options.debug:
            return None
        return check(self, lhs, rhs, binary_op)

    sanitize_when_asserted.triton_original = check
    TritonSemantic.binary_op_sanitize_overflow_impl = sanitize_when_asserted


_overflow_check_only_when_asserted()


def _patch_lang_once_a_launch() -> None:
    """A launch patches ``tl`` (its builtins, ``tl.tensor``'s, ``tl.math``'s, ``range`` and
    the rest) for the kernel's module, and undoes it when the grid is done. Every call of a
    ``@triton.jit`` helper inside it runs that patching again (tens of thousands of calls a
    test, ~20% of an NVFP4 test's time), although nothing it does depends on the helper
    but which of ``tl`` / ``tl.core`` its module holds. Here a helper call inside a launch
    skips it when the launch, or a helper call before it in the launch, has patched those
    already (a helper's patching is never undone, in Triton's own code too); outside a launch,
    or the first time a module holds one not patched yet, it runs as before."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return
    launch_cls = getattr(interpreter, "GridExecutor", None)
    helper_cls = getattr(interpreter, "InterpretedFunction", None)
    patch_lang = getattr(interpreter, "_patch_lang", None)
    scope_cls = getattr(interpreter, "_LangPatchScope", None)
    if None in (launch_cls, helper_cls, patch_lang, scope_cls):
        return                          # another Triton: leave its interpreter as it is
    launch_call, helper_call = launch_cls.__call__, helper_cls.__call__
    state = {"launch": None, "helpers": 0}

    def langs(fn) -> frozenset:
        return frozenset(id(v) for v in fn.__globals__.values() if v is tl or v is tl.core)

    def patch_lang_unless_done(fn):
        done = state["launch"]
        if state["helpers"] and done is not None:
            wanted = langs(fn)
            if wanted <= done:
                return scope_cls()      # nothing to patch, nothing to undo
            state["launch"] = done | wanted     # a helper's patching stays for the launch
        return patch_lang(fn)

    def run_launch(self, *args, **kwargs):
        outer, state["launch"] = state["launch"], langs(self.fn)
        try:
            return launch_call(self, *args, **kwargs)
        finally:
            state["launch"] = outer

    def call_helper(self, *args, **kwargs):
        state["helpers"] += 1
        try:
            return helper_call(self, *args, **kwargs)
        finally:
            state["helpers"] -= 1

    patch_lang_unless_done.triton_original = patch_lang
    interpreter._patch_lang = patch_lang_unless_done
    launch_cls.__call__, helper_cls.__call__ = run_launch, call_helper


_patch_lang_once_a_launch()


def _exact_bf16_widening() -> None:
    """Triton's interpreter widens bf16 to fp32 through a general float conversion that
    renormalizes a subnormal's significand, then finds no exponent below fp32's smallest
    normal to give it (bf16 has fp32's exponent range): 1.0e-39 loads as 4.4e-39 (Triton
    3.9). On the GPU the widening is exact: bf16's 16 bits become fp32's top 16. Here too, so
    that kernels which widen loaded bf16 see the GPU's values on subnormal inputs (every
    other bf16 value widens to the same bits as before; ``test_interpreter_patches.py``)."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return
    convert = getattr(interpreter, "_convert_float", None)
    if convert is None:
        return                          # another Triton: leave its interpreter as it is

    def widen_bf16_exactly(input, input_dtype, output_dtype, rounding_mode):
        if input_dtype == tl.bfloat16 and output_dtype == tl.float32:
            bits = np.frombuffer(input.tobytes(), dtype=np.uint16).astype(np.uint32) << 16
            return bits.reshape(input.shape)
        return convert(input, input_dtype, output_dtype, rounding_mode)

    widen_bf16_exactly.triton_original = convert
    interpreter._convert_float = widen_bf16_exactly


_exact_bf16_widening()

# The launch configs _interpreter_tiles changes, as configured for the GPU: per module
# ("quant_nvfp4", "quant_mx"), its CONFIG entries.
_GPU_CONFIGS: dict[str, dict] = {}


def _interpreter_tiles() -> None:
    """Under Triton's interpreter a launch costs about its op count per tile times its tiles
    (each op's numpy work is small at test sizes). The NVFP4 row kernel's GPU tiles are 2-4
    rows of 8-32 blocks, the register pass's and its amax pass's 32-64 columns, and the MX
    kernel's 32 rows, so a test's input ran as tens of tiles. In the interpreter the row
    kernel's tiles take 64 rows (32 blocks wide), the register pass's and the amax pass's 128
    columns, and the MX kernel's 128 rows: the same code paths at the same op count a tile,
    partial tiles kept where a test's shape leaves them. Every setting gives the same bits by
    design (``quant_nvfp4_config``, ``quant_mx``); the GPU tests run the configured tiles
    compiled, and the tests that take :func:`gpu_tiles` run them here too
    (``test_row_kernel_variants``, ``test_nvfp4_reg_pass_exact``, the amax pass's partials
    and unclamped tests, ``test_mx_rowcol_exact``; ``test_mxfp4_column_view_in_registers_exact``
    sets the MX rows itself)."""
    import os
    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    try:
        from microscale.kernels import quant_mx
        from microscale.kernels.quant_nvfp4_config import CONFIG
    except ImportError:                 # no Triton: nothing runs in the interpreter
        return
    keys = ("ROW1", "REG", "REG_ROW", "REG_COL", "REG_AMAX")
    _GPU_CONFIGS["quant_nvfp4"] = {k: CONFIG[k] for k in keys}
    _GPU_CONFIGS["quant_mx"] = {"BR": quant_mx.CONFIG["BR"]}
    row1 = CONFIG["ROW1"]
    CONFIG["ROW1"] = {**row1, "BR": 64, "NB": 32, "SR_CODES": {**row1["SR_CODES"], "BR": 64},
                      "RNE_CODES": {**row1["RNE_CODES"], "BR": 64},
                      "RHT_CODES": {**row1["RHT_CODES"], "BR": 64}}
    for key in ("REG", "REG_ROW", "REG_COL", "REG_AMAX"):
        CONFIG[key] = {**CONFIG[key], "BC": 128}
        if "BC" in CONFIG[key].get("RNE", {}):          # (REG_COL's RNE column views)
            CONFIG[key]["RNE"] = {**CONFIG[key]["RNE"], "BC": 128}
    quant_mx.CONFIG["BR"] = 128


_interpreter_tiles()


@pytest.fixture
def gpu_tiles(monkeypatch):
    """``gpu_tiles(module, *keys)`` puts back, for this test, the launch configs ``keys`` of
    ``microscale.kernels.<module>.CONFIG`` that the suite's interpreter runs replace
    (:func:`_interpreter_tiles`), as configured for the GPU, and returns them (``{key:
    config}``, empty where none was replaced: outside the interpreter).
    ``gpu_tiles.configs(module)`` returns them all without putting any back."""
    import importlib

    def put_back(module: str, *keys: str) -> dict:
        config = importlib.import_module(f"microscale.kernels.{module}").CONFIG
        gpu = {k: v for k, v in _GPU_CONFIGS.get(module, {}).items() if k in keys}
        for key, value in gpu.items():
            monkeypatch.setitem(config, key, value)
        return gpu
    put_back.configs = lambda module: dict(_GPU_CONFIGS.get(module, {}))
    return put_back


def pytest_collection_modifyitems(config, items):
    """``slow`` tests first (in their order, the rest in theirs): xdist's workers then end on
    short tests, not one waiting on another's minute-long compile. ``gpu`` tests skip
    without CUDA."""
    items.sort(key=lambda item: "slow" not in item.keywords)
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
