"""Host work per op call: the torch calls a quantized layer's ops make on the host.

A step that is not replayed as one CUDA graph (FSDP2, DDP, a Hugging Face model, a compiled
model without the harness's step graph) pays every op's host work, and on CUDA each torch
call inside an op is dispatcher and allocator time, a ``zeros``/``clone``/cast a kernel
launch too. These tests record the op calls of one ``ms.Linear`` forward + backward (kernels
in Triton's interpreter, their bodies stubbed out: only the host side runs) and bound the
torch calls each op's implementation makes: the outputs' allocations, one zeroed amax buffer,
the dtype views the launches take, and nothing per call that could be made once (transposed
tensors only to validate a view, buffers replaced after allocation, placeholders for absent
views). ``benchmarks/bench_host_stub.py`` prints the same counts with the host µs.
"""

from __future__ import annotations

import collections
import dataclasses
import os

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import microscale as ms
from microscale import ops, ops_gemm
from microscale.recipe import Recipe

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                reason="the kernels' host side on CPU needs TRITON_INTERPRET=1")

# the most torch calls one op implementation may make (per recipe: the layer's largest call)
BUDGET = {"nvfp4": {"quantize_rowcol": 12, "scaled_mm": 8, "expand": 3},
          "fp8_blockwise": {"quantize_rowcol": 11, "scaled_mm": 5},
          "mxfp8": {"quantize_rowcol": 11, "scaled_mm": 9, "expand": 2}}
_IMPLS = {"quantize_rowcol": ops._quantize_rowcol_op, "scaled_mm": ops_gemm._scaled_mm_op,
          "expand": ops_gemm._expand_op}


class _Calls(TorchDispatchMode):
    """Records microscale op calls (``record=True``) or counts aten calls by name."""

    def __init__(self, record: bool):
        super().__init__()
        self.record, self.calls, self.aten = record, [], collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.record and func.namespace == "microscale":
            self.calls.append((func.__name__.split(".")[0], args, kwargs or {}))
        elif not self.record and not str(func).startswith("aten.detach"):
            self.aten[str(func)] += 1      # detach: this mode's own artefact around views
        return func(*args, **(kwargs or {}))


@pytest.fixture
def stubbed_kernels(monkeypatch):
    """Kernel launches that run nothing (their host side, the wrappers, runs in full); the
    emulated GEMM's fp32 matmul, CPU-only arithmetic where CUDA makes one cuBLAS call, is one
    allocation of its result."""
    import triton.runtime.interpreter as interp

    from microscale.kernels import gemm_alpha
    launches = []
    monkeypatch.setattr(interp.InterpretedFunction, "run",
                        lambda self, *a, **k: launches.append(self))
    monkeypatch.setattr(gemm_alpha, "_mm_fp32_out", lambda a, b: a.new_empty(
        (a.shape[0], b.shape[0]), dtype=torch.float32))
    return launches


@pytest.mark.parametrize("name", sorted(BUDGET))
def test_layer_ops_make_few_torch_calls(name, stubbed_kernels, monkeypatch):
    from microscale.nn import function
    # xᵀ kept as codes, so the op that decodes it runs and is counted too (EXPAND_XT "auto"
    # would keep this 128-wide MXFP8 input's xᵀ expanded)
    monkeypatch.setitem(function.CONFIG, "EXPAND_XT", False)
    torch.manual_seed(0)
    recipe = dataclasses.replace(Recipe.parse(name), backend="triton")
    layer = ms.Linear(128, 128, bias=False, recipe=recipe)
    x = torch.randn(128, 128, dtype=torch.bfloat16, requires_grad=True)
    with _Calls(record=True) as rec:
        layer(x).float().sum().backward()
    # (+ wgrad's xᵀ decoded by its own op where the GEMM would decode it: nn.function's
    # DECODE_XT_OP)
    want = ["quantize_rowcol"] * 3 + ["scaled_mm"] * 3 + ["expand"] * ("expand" in BUDGET[name])
    assert sorted(c[0] for c in rec.calls) == sorted(want)
    for op, args, kwargs in rec.calls:
        with _Calls(record=False) as counted:
            _IMPLS[op](*args, **kwargs)
        calls = dict(counted.aten)
        assert sum(calls.values()) <= BUDGET[name][op], f"{name} {op}: {calls}"
        if op == "quantize_rowcol":          # (a GEMM passes B transposed to torch.mm)
            assert "aten.t.default" not in calls, f"{name} {op}: a transpose per call: {calls}"
    assert stubbed_kernels                      # the kernels' host side ran (not the reference)
