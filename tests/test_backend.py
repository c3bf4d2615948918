"""The dispatch layer says which path every call took, warns once on a CUDA fallback, and
raises instead in strict mode (no silent fallback to a slower or higher-precision path)."""

from __future__ import annotations

import logging

import pytest
import torch

import microscale as ms
from microscale import backend


@pytest.fixture
def refusing_kernel():
    """A registered kernel that refuses every call, under a made-up op name."""
    @backend.register_kernel("test_op", "k")
    def kernel(x):
        raise backend.KernelUnsupported("tile shape 7 not supported")
    yield
    backend._KERNELS.pop(("test_op", "k"), None)
    backend._WARNED.discard(("test_op", "k"))
    backend.set_strict(False)


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def test_cuda_fallback_warns_once_and_is_recorded(refusing_kernel):
    cuda = torch.device("cuda")          # only the device's type is read: no GPU needed
    handler = _Records()
    logging.getLogger("microscale.backend").addHandler(handler)
    try:
        for _ in range(2):
            assert backend.dispatch("test_op", "k", "auto", cuda, lambda x: x + 1, 1) == 2
    finally:
        logging.getLogger("microscale.backend").removeHandler(handler)
    warnings = [r for r in handler.records if "test_op(k)" in r.getMessage()]
    assert len(warnings) == 1 and "tile shape 7" in warnings[0].getMessage()
    assert backend.explain()[("test_op", "k")] == "reference (fallback: tile shape 7 not supported)"
    backend.set_strict(True)
    with pytest.raises(RuntimeError, match="strict mode: test_op\\(k\\).*tile shape 7"):
        backend.dispatch("test_op", "k", "auto", cuda, lambda x: x + 1, 1)
    with pytest.raises(RuntimeError, match="no kernel is registered"):
        backend.dispatch("test_op", "missing", "auto", cuda, lambda x: x, 1)


def test_explain_lists_a_models_paths():
    layer = ms.Linear(128, 128, recipe="fp8_blockwise")
    layer(torch.randn(128, 128, requires_grad=True)).sum().backward()
    report = ms.explain(torch.nn.Sequential(layer))
    assert set(report) == layer.recipe.op_keys()
    assert all(path == "reference (cpu tensor)" for path in report.values())
    assert "scaled_mm(fp8_blockxfp8_block)" in str(report)
    assert ("quantize_rowcol", "fp8_block|fp8_block") in layer.recipe.op_keys()
