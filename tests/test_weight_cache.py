"""``ms.weight_cache``: weights quantized once per optimizer step under gradient accumulation,
with bit-identical results, checked staleness and no recompilation under ``torch.compile``."""

from __future__ import annotations

import pytest
import torch

import microscale as ms
from microscale.nn import function

PRESETS = ["nvfp4", "fp8_blockwise", "mxfp8", "fp8_tensorwise", "mxfp4"]


def _layer(recipe: str, seed: int = 0) -> ms.Linear:
    torch.manual_seed(seed)
    return ms.Linear(128, 256, recipe=recipe)


def _accumulate(layer, batches, cached: bool, seed: int = 7):
    """Two micro-batches, gradients accumulated; SR seeds drawn from one fixed generator."""
    layer.zero_grad()
    ys, dxs = [], []
    torch.manual_seed(seed)
    with ms.weight_cache(layer) if cached else _null():
        for x in batches:
            x = x.clone().requires_grad_(True)
            y = layer(x)
            (y.float() * torch.linspace(-1, 1, y.shape[-1])).sum().backward()
            ys.append(y.detach())
            dxs.append(x.grad)
    return ys, dxs, layer.weight.grad.clone()


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("recipe", PRESETS)
def test_cached_weights_give_the_same_bits(recipe):
    batches = [torch.randn(64, 128, dtype=torch.bfloat16) for _ in range(2)]
    plain = _accumulate(_layer(recipe), batches, cached=False)
    cached = _accumulate(_layer(recipe), batches, cached=True)
    for a, b in zip(plain[0] + plain[1] + [plain[2]], cached[0] + cached[1] + [cached[2]]):
        assert torch.equal(a, b)


def test_weights_are_quantized_once_per_block(monkeypatch):
    layer = _layer("fp8_blockwise")
    calls = []
    real = function._views

    def counting(t2d, *args, **kwargs):
        calls.append(t2d is layer.weight)
        return real(t2d, *args, **kwargs)

    monkeypatch.setattr(function, "_views", counting)
    batches = [torch.randn(32, 128) for _ in range(3)]
    _accumulate(layer, batches, cached=False)
    assert sum(calls) == 3                       # one W quantization per micro-batch
    calls.clear()
    _accumulate(layer, batches, cached=True)
    assert sum(calls) == 1                       # one for the whole step
    assert layer._weight_cache is None           # dropped when the block ends


def test_a_weight_changed_inside_the_block_is_an_error():
    layer = _layer("nvfp4_no_sr")
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    with pytest.raises(RuntimeError, match="changed inside"):
        with ms.weight_cache(layer):
            layer(torch.randn(16, 128)).sum().backward()
            opt.step()
    assert layer._weight_cache is None


def test_delayed_weight_history_advances_once_per_block():
    layer = _layer("fp8_delayed")
    hist = layer.delayed_state()["fprop.b/history"]
    with ms.weight_cache(layer):
        for _ in range(3):
            layer(torch.randn(16, 128)).sum().backward()
    filled = int((hist != 0).sum())
    plain = _layer("fp8_delayed")
    for _ in range(3):
        plain(torch.randn(16, 128)).sum().backward()
    assert filled == 1 and int((plain.delayed_state()["fprop.b/history"] != 0).sum()) == 3


def test_a_precision_switch_inside_the_block_quantizes_per_call():
    layer = _layer("fp8_blockwise")
    x = torch.randn(16, 128)
    with ms.weight_cache(layer):
        layer.hp_fprop = True                    # the plan changes: the cache does not apply
        y = layer(x)
    layer.hp_fprop = True
    assert torch.equal(y, layer(x))


def test_compiled_layer_uses_the_cache_without_recompiling():
    torch._dynamo.reset()
    layer = _layer("fp8_blockwise")
    run = torch.compile(layer, backend="aot_eager", fullgraph=True)
    x = torch.randn(64, 128)
    eager = layer(x)
    with torch._dynamo.config.patch(recompile_limit=1):
        for _ in range(2):                       # a new block: new cached tensors, same graph
            with ms.weight_cache(layer):
                assert torch.equal(run(x), eager)
    torch._dynamo.reset()


def test_bad_arguments():
    with pytest.raises(TypeError, match="nn.Module"):
        with ms.weight_cache("model"):
            pass
