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
    # every op the step ran; the weights' many-tensor op only if a weight cache ran it (in this
    # process: the paths are the last call's of each op and key, whichever model made it)
    assert layer.recipe.op_keys() <= set(report) \
        <= layer.recipe.op_keys() | layer.recipe.weight_cache_keys()
    assert all(report[key] == "reference (cpu tensor)" for key in layer.recipe.op_keys())
    assert "scaled_mm(fp8_blockxfp8_block)" in str(report)
    assert ("quantize_rowcol", "fp8_block|fp8_block") in layer.recipe.op_keys()


def test_explain_shows_the_weight_caches_many_op():
    """A model whose step runs inside ``ms.weight_cache`` quantizes its weights all at once
    (``quantize_rowcol_many``): ``ms.explain(model)`` says which path that took, for NVFP4's
    one view (W, its transpose for dgrad) as for FP8 128x128 pairs; a model whose recipe
    never reaches that op does not list it."""
    for recipe, key in (("nvfp4_no_sr", "nvfp4|none"), ("fp8_blockwise", "fp8_block|fp8_block")):
        model = torch.nn.Sequential(ms.Linear(128, 128, recipe=recipe),
                                    ms.Linear(128, 128, recipe=recipe))
        with ms.weight_cache(model):
            model(torch.randn(32, 128, requires_grad=True)).sum().backward()
        report = ms.explain(model)
        assert report[("quantize_rowcol_many", key)] == "reference (cpu tensor)"
        assert f"quantize_rowcol_many({key})" in str(report)
    other = torch.nn.Sequential(ms.Linear(128, 128, recipe="fp8_tensorwise"))
    other(torch.randn(32, 128)).sum().backward()
    assert not any(op == "quantize_rowcol_many" and k != "fp8_tensor|fp8_tensor"
                   for op, k in ms.explain(other))
