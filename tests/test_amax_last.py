"""``kernels._amax``: the FP8 blockwise and MXFP8 pair kernels' amax written by the last
program to finish (no zeroed buffer): the bits of the zeroed buffer + ``atomic_max``, the
counter back at zero after every launch, one counter per stream, and the fallback."""

from __future__ import annotations

import pytest
import torch

from microscale.kernels import _amax
from microscale.kernels.quant_fp8 import quantize_rowcol_fp8_block_triton
from microscale.kernels.quant_mx import quantize_rowcol_mx_triton
from microscale.tensor import QFormat

FP8 = (QFormat.FP8_BLOCK, {"block": (1, 128), "check_finite": False})
MX8 = (QFormat.MXFP8_E4M3, {"check_finite": False})


def _pair(x: torch.Tensor, fmt: str):
    if fmt == "fp8":
        return quantize_rowcol_fp8_block_triton(x, FP8, FP8)
    return quantize_rowcol_mx_triton(x, MX8, MX8)


def _inputs(device: str, n: int = 3):
    """Tensors of several [128, 128] tiles (two programs in the interpreter, many on a GPU),
    each with its largest magnitude in another tile (the interpreter's second program owns
    tiles 1 and 3, its first 0, 2 and 4), one with NaN and Inf."""
    g = torch.Generator().manual_seed(5)
    out = []
    spots = [(10, 200), (300, 20), (250, 130)]
    for i in range(n):
        x = torch.randn(384, 256, generator=g) * (i + 1)
        x[spots[i % 3]] = -1000.0 * (i + 2)
        out.append(x.to(device=device, dtype=torch.bfloat16))
    x = out[-1].clone()
    x[5, 7], x[300, 200] = float("nan"), float("inf")
    return out + [x]


def _max_abs(x: torch.Tensor) -> torch.Tensor:
    """max |x| with NaN dropped (Inf kept): what the kernels' maxima give."""
    a = x.float().abs()
    return torch.where(torch.isnan(a), 0.0, a).max()


def _amaxes(xs, fmt: str, last: bool):
    saved = dict(_amax.CONFIG)
    _amax.CONFIG["LAST_PROGRAM"] = last
    try:
        pairs = [_pair(x, fmt) for x in xs]
    finally:
        _amax.CONFIG.update(saved)
    return [(row.amax.clone(), col.amax.clone(), row.data.view(torch.uint8).clone())
            for row, col in pairs]


def _check(xs, fmt: str):
    new, old = _amaxes(xs, fmt, True), _amaxes(xs, fmt, False)
    for x, (r_new, c_new, d_new), (r_old, c_old, d_old) in zip(xs, new, old):
        finite = _max_abs(x)
        # the zeroed buffer's bits (NaN dropped as the kernels' maxima drop it; Inf kept)
        assert r_new.shape == c_new.shape == ()
        assert torch.equal(r_new.view(torch.int32), r_old.view(torch.int32))
        assert torch.equal(c_new.view(torch.int32), c_old.view(torch.int32))
        assert r_new.item() == finite.item()
        assert torch.equal(d_new, d_old)
    block = _amax._BLOCKS[str(xs[0].device)]
    assert int(block.abs().sum()) == 0, "a counter was left nonzero after its launch"


@pytest.mark.parametrize("fmt", ["fp8", "mx8"])
def test_last_program_amax_matches_the_zeroed_buffer(fmt):
    """Successive launches (a counter not reset would leave the next launch's amax unwritten)
    give each input's own max |x|, bit for bit the old path's, NaN dropped, Inf kept."""
    _check(_inputs("cpu"), fmt)


def test_amax_buffers_fall_back_to_a_zeroed_buffer():
    """``LAST_PROGRAM`` off (or no counter for the stream): a zeroed amax, no partials."""
    amax, parts, counter, last = _amax.amax_buffers(torch.device("cpu"), 2)
    assert last and amax.shape == () and parts.shape == (2,) and counter.dtype == torch.int32
    _amax.CONFIG["LAST_PROGRAM"] = False
    try:
        amax, parts, counter, last = _amax.amax_buffers(torch.device("cpu"), 2, slots=2)
    finally:
        _amax.CONFIG["LAST_PROGRAM"] = True
    assert not last and torch.equal(amax, torch.zeros(2)) and parts is amax and counter is amax
    assert _amax.parts_width(3) == 1024 and _amax.parts_width(1500) == 2048


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["fp8", "mx8"])
def test_gpu_last_program_amax_across_streams_and_a_graph(fmt):
    """On the GPU (hundreds of programs, in any order): the same bits as the zeroed buffer;
    two streams launching at once, each with its counter; a captured pair replayed with new
    inputs; every counter back at zero."""
    xs = _inputs("cuda", 6)
    _check(xs, fmt)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    want = [_max_abs(x) for x in xs]
    got = []
    for _ in range(20):
        for s, i in ((s1, 0), (s2, 1), (s1, 2), (s2, 3)):
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                got.append((_pair(xs[i], fmt)[0].amax, i))
    torch.cuda.synchronize()
    assert all(a.item() == want[i].item() for a, i in got)
    static = xs[0].clone()
    _pair(static, fmt)                                   # warm-up before the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        amax = _pair(static, fmt)[0].amax
    for x, w in zip(xs, want):
        static.copy_(x)
        graph.replay()
        torch.cuda.synchronize()
        assert amax.item() == w.item()
    assert int(_amax._BLOCKS["cuda:0"].abs().sum()) == 0
