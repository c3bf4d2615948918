"""FP8 blockwise GEMMs through DeepGEMM, where it is installed (optional), chosen per shape.

DeepGEMM (github.com/deepseek-ai/DeepGEMM, MIT) is DeepSeek's JIT-compiled FP8 GEMM library
for Hopper. Its ``fp8_gemm_nt`` computes exactly the products that :mod:`.gemm_fp8` sends to
cuBLASLt for ``fp8_blockwise`` (SPEC: exact up to summation order)::

    y[m, n] = Σ_kb  sa[m, kb] · sb[·, kb] · Σ_{k in block kb} a[m, k] · b[n, k]

FP8 tensor-core products summed in fp32 per 128-wide K block, each block's sum scaled before it
joins the total. Two kinds of call:

* ``1d2d`` (``recipe (1, 128, 128)``): a 1×128 activation or gradient times a 128×128 weight,
  ``sb[n/128, kb]``; fprop ``x Wᵀ`` and dgrad ``dy W``; bf16 output (the kernel writes nothing
  else).
* ``1d1d`` (``recipe (1, 1, 128)``): both operands 1×128 along K, ``sb[n, kb]``; wgrad ``dyᵀ x``
  (K = tokens); fp32 output, which the kernel accumulates into (``D = C + A Bᵀ``: from zeros).

Which is faster depends on the shape (``benchmarks/bench_deepgemm.py``, H200, CUDA 13.0,
DeepGEMM 2.6.1 at ``54e2261``, 16384 tokens, graph-replayed; session 48 call 9, session 49 calls
1 and 9): ``1d2d`` ran 1.07-1.26× cuBLASLt's speed at the 1b and issue-12 shapes, 1.12-1.56× at
125m's, 0.90-1.30× at 50m's; ``1d1d`` 0.84-1.02× at the 1b and issue-12 weight gradients,
0.62-1.01× at 50m's, but 1.6× and 1.9× at 125m's MLP ones (3072×768 and 768×3072, K 16384:
cuBLASLt there 0.65-0.70× of a bf16 GEMM). Every output bit-identical to cuBLASLt's.
So the choice is timed, per shape (``CONFIG["CHOICE"]``):

* ``"timed"`` (default): the first call of each (kind, M, N, K, device) runs both once (DeepGEMM
  JIT-compiles then), times a few calls of each on the GPU (queued behind a device sleep long
  enough to hide the host's launch time, which a replayed graph does not pay), and keeps the
  faster for the process (:func:`choices`). Timing needs a host sync, so it is done only where
  one is allowed: not while a CUDA graph is captured, nor under
  ``torch.cuda.set_sync_debug_mode``; there an untimed shape takes the prior below, uncached.
  A training step's first (warm-up) call decides; later steps never sync.
* ``"prior"``: session 48's rule without timing: ``1d2d`` on DeepGEMM, ``1d1d`` on cuBLASLt.
* ``"always"``: DeepGEMM wherever it takes the call.

Layouts are the ones our quantizers already write: A ``[M, K]`` and B ``[N, K]`` E4M3 codes,
K-contiguous; 1×128 scales ``[rows, K/128]`` M-major (column-major, as cuBLASLt wants them;
rows a multiple of 4 keep them TMA-aligned, else DeepGEMM copies them; others are copied so
here), 128×128 scales ``[N/128, K/128]`` contiguous or transposed.

Choosing it: :func:`refuses` says why DeepGEMM cannot take a call (None when it can),
:func:`prefers` whether it should; then ``gemm_fp8.scaled_mm_fp8`` runs it and records the path
(``ms.explain()``: ``scaled_mm(fp8_blockxfp8_block 1x128·128x128)`` and ``(... 1x128·1x128)``,
the detail naming the last timing). ``CONFIG["ENABLED"]`` (env ``MICROSCALE_DEEPGEMM=0``)
switches it off; an error from DeepGEMM at run time falls back to cuBLASLt through
``backend.note_fallback`` (a warning, or an error in strict mode), never silently, and turns that
kind off for the rest of the process (no retry per call).

Installing it: DeepGEMM is built from source (with CUTLASS's and fmt's headers). On images
whose libstdc++ differs from the one PyTorch's wheel was linked with, its module must carry its
own libstdc++ (``-static-libstdc++ -Wl,-Bsymbolic``): built plainly, its JIT's ``std::regex``
and stream formatting crashed inside libstdc++'s locale facets (session 48, calls 3-8;
``tools/build_deepgemm.py`` builds it that way, and clones it where asked).
"""

from __future__ import annotations

import os
from typing import Callable

import torch

from ..tensor import QFormat, QuantizedTensor

__all__ = ["CONFIG", "deepgemm_module", "refuses", "prefers", "scaled_mm_deepgemm", "choices",
           "kind_of", "PATH_KEYS", "RECIPES", "CHOICES"]

CHOICES = ("timed", "prior", "always")
CONFIG = {"ENABLED": os.environ.get("MICROSCALE_DEEPGEMM", "1") != "0",
          "CHOICE": os.environ.get("MICROSCALE_DEEPGEMM_CHOICE", "timed"),
          "TIMED_CALLS": 5}            # calls of each GEMM timed per shape
RECIPES = {"1d2d": (1, 128, 128), "1d1d": (1, 1, 128)}
PATH_KEYS = {"1d2d": "fp8_blockxfp8_block 1x128·128x128",     # their entries in ms.explain()
             "1d1d": "fp8_blockxfp8_block 1x128·1x128"}
PRIOR = {"1d2d": True, "1d1d": False}        # session 48's measurements: DeepGEMM or not
_OUT = {"1d2d": torch.bfloat16, "1d1d": torch.float32}
_MODULE: list = []                            # [module or None, import error]
_BROKEN: dict[str, str] = {}                  # kind -> the run-time error that turned it off
_CHOSEN: dict[tuple, tuple[bool, str]] = {}   # (kind, m, n, k, device) -> (DeepGEMM?, why)


def deepgemm_module():
    """The ``deep_gemm`` module, imported once; None where it is not installed."""
    if not _MODULE:
        try:
            import deep_gemm
            _MODULE[:] = [deep_gemm, ""]
        except Exception as err:           # not installed, or built for another torch/CUDA
            _MODULE[:] = [None, f"{type(err).__name__}: {err}"]
    return _MODULE[0]


def kind_of(qa: QuantizedTensor, qb: QuantizedTensor) -> str | None:
    """``"1d2d"`` (1×128 · 128×128), ``"1d1d"`` (1×128 · 1×128) or None (another pair)."""
    blocks = (tuple(qa.block), tuple(qb.block))
    return {((1, 128), (128, 128)): "1d2d", ((1, 128), (1, 128)): "1d1d"}.get(blocks)


def refuses(qa: QuantizedTensor, qb: QuantizedTensor, out_dtype: torch.dtype) -> str | None:
    """Why DeepGEMM cannot take ``qa @ qbᵀ`` (None: it can)."""
    if not CONFIG["ENABLED"]:
        return "off (CONFIG['ENABLED'] / MICROSCALE_DEEPGEMM=0)"
    if qa.fmt != QFormat.FP8_BLOCK or qb.fmt != QFormat.FP8_BLOCK:
        return "not FP8 blockwise"
    kind = kind_of(qa, qb)
    if kind is None:
        return (f"scale blocks {tuple(qa.block)} x {tuple(qb.block)}, not (1, 128) x "
                "(128, 128) or (1, 128) x (1, 128)")
    if kind in _BROKEN:
        return f"turned off after an error: {_BROKEN[kind]}"[:200]
    if qa.data.dtype != torch.float8_e4m3fn or qb.data.dtype != torch.float8_e4m3fn:
        return "not E4M3 codes"
    if out_dtype != _OUT[kind]:
        return f"{out_dtype} output (its {kind} kernel writes {_OUT[kind]})"
    if qa.device.type != "cuda" or torch.cuda.get_device_capability(qa.device)[0] != 9:
        return "not a Hopper (sm_90) GPU"
    n, k = qb.data.shape[0], qa.data.shape[1]
    if k % 128 or n % 8:                  # TMA: 16-byte rows of B and of the output
        return f"K = {k} not a multiple of 128 or N = {n} not a multiple of 8"
    if deepgemm_module() is None:
        return f"deep_gemm is not importable ({_MODULE[1][:120]})"
    return None


def _mn_major(s: torch.Tensor) -> torch.Tensor:
    return s if s.stride(0) == 1 else s.t().contiguous().t()


def scaled_mm_deepgemm(qa: QuantizedTensor, qb: QuantizedTensor) -> torch.Tensor:
    """``A Bᵀ`` through ``deep_gemm.fp8_gemm_nt`` (check :func:`refuses` first): bf16 for a
    ``1d2d`` pair, fp32 for ``1d1d``."""
    kind = kind_of(qa, qb)
    sa, sb = _mn_major(qa.scale.float()), qb.scale.float()
    m, n = qa.data.shape[0], qb.data.shape[0]
    if kind == "1d1d":                   # it accumulates into C = D: from zeros
        sb = _mn_major(sb)
        y = torch.zeros(m, n, device=qa.device, dtype=torch.float32)
        deepgemm_module().fp8_gemm_nt((qa.data, sa), (qb.data, sb), y, c=y,
                                      recipe=RECIPES[kind])
        return y
    if not (sb.is_contiguous() or sb.t().is_contiguous()):
        sb = sb.contiguous()
    y = torch.empty(m, n, device=qa.device, dtype=torch.bfloat16)
    deepgemm_module().fp8_gemm_nt((qa.data, sa), (qb.data, sb), y, recipe=RECIPES[kind])
    return y


def turn_off(kind: str, why: str) -> None:
    """A run-time error: that kind stays on cuBLASLt for the rest of the process."""
    _BROKEN[kind] = why


def choices() -> dict[tuple, tuple[bool, str]]:
    """The timed decisions so far: ``(kind, M, N, K, device) -> (DeepGEMM?, why)``."""
    return dict(_CHOSEN)


def _can_sync() -> bool:
    return not torch.cuda.is_current_stream_capturing() and \
        torch.cuda.get_sync_debug_mode() == 0


def _gpu_us(fn: Callable[[], object], calls: int) -> float:
    """Microseconds a call of ``fn`` keeps the GPU busy, as a replayed graph would run it: the
    calls are queued behind a device sleep and timed by events, so the host's launch time
    (cuBLASLt's Python wrapper: ~0.1 ms a call) is hidden. If the sleep ended before the
    last call was queued (the start event has fired), it is doubled and the timing redone."""
    fn()                                      # JIT / plan / layout caches first
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    cycles = 1 << 20                          # ~0.5 ms at Hopper's clocks
    for _ in range(6):
        torch.cuda.synchronize()
        torch.cuda._sleep(cycles)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        hidden = not start.query()            # still sleeping: every call was queued in time
        end.synchronize()
        if hidden:
            break
        cycles *= 2
    return start.elapsed_time(end) * 1e3 / calls


def prefers(qa: QuantizedTensor, qb: QuantizedTensor, cublas: Callable[[], object]) -> tuple:
    """``(DeepGEMM?, why)`` for a call :func:`refuses` let through; ``cublas()`` runs the
    cuBLASLt alternative (timed only under ``CONFIG["CHOICE"] == "timed"``)."""
    kind, mode = kind_of(qa, qb), CONFIG["CHOICE"]
    if mode not in CHOICES:
        raise ValueError(f"gemm_deepgemm.CONFIG['CHOICE'] must be one of {CHOICES}, got {mode!r}")
    if mode == "always":
        return True, "CHOICE always"
    key = (kind, qa.data.shape[0], qb.data.shape[0], qa.data.shape[1], str(qa.device))
    if key in _CHOSEN and mode == "timed":
        return _CHOSEN[key]
    if mode == "prior" or not _can_sync():
        return PRIOR[kind], "untimed: session 48's rule for " + kind
    calls = CONFIG["TIMED_CALLS"]
    us_dg = _gpu_us(lambda: scaled_mm_deepgemm(qa, qb), calls)
    try:
        us_cublas = _gpu_us(cublas, calls)
    except Exception as err:        # e.g. KernelUnsupported: this torch has no blockwise path
        _CHOSEN[key] = (True, f"cuBLASLt could not run it: {type(err).__name__}: {err}"[:200])
        return _CHOSEN[key]
    _CHOSEN[key] = (us_dg < us_cublas,
                    f"timed at {key[1]}x{key[2]}x{key[3]}: {us_dg:.1f} us, cuBLASLt "
                    f"{us_cublas:.1f} us")
    return _CHOSEN[key]
