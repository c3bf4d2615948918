"""Persistent launches sized to what fits on one SM (kernels/_launch.py)."""

from types import SimpleNamespace

import pytest
import torch

from microscale.kernels import _launch

H100 = (65536, 233472, 2048)          # registers, shared bytes, threads per SM


@pytest.mark.parametrize("n_regs, shared, warps, fit", [
    (152, 0, 4, 3),       # the NVFP4 amax pass as Nsight Compute measured it: 3 of 4 fit
    (255, 0, 4, 2),       # the reg pass: 2 (12.5% occupancy)
    (78, 0, 4, 6),        # the SR rows pass: 6 of 16 (37.5%)
    (32, 0, 4, 16),       # warp slots: 64 warps an SM
    (32, 0, 1, 32),       # at most 32 programs an SM
    (40, 60000, 4, 3),    # shared memory: 3 × (60000 + 1024) bytes fit, 4 do not
    (255, 0, 16, 1),      # never fewer than one
])
def test_resident_programs(n_regs, shared, warps, fit):
    assert _launch.resident_programs(n_regs, shared, warps, H100) == fit


class _Kernel:
    """Stands for a Triton JIT function: records each launch's grid, returns a compiled
    kernel with the given register and shared-memory use."""

    def __init__(self, n_regs, shared=0):
        self.grids, self.compiled = [], SimpleNamespace(
            n_regs=n_regs, metadata=SimpleNamespace(shared=shared))

    def __getitem__(self, grid):
        def launch(*args, **opts):
            self.grids.append(grid[0])
            return self.compiled
        return launch


def test_launch_shrinks_the_grid_once_resources_are_known(monkeypatch):
    sms = 132
    monkeypatch.setattr(_launch, "persistent_grid",
                        lambda n, dev, progs: max(1, min(n, sms * progs)))
    monkeypatch.setattr(_launch, "_sm_limits", lambda dev: H100)
    monkeypatch.setitem(_launch.FIT, "on", True)
    dev = torch.device("cuda", 0)                      # never touched: the launch is faked
    amax = _Kernel(152)
    for _ in range(3):
        _launch.launch_persistent(amax, 4096, dev, 4, (7, True), num_warps=4)
    assert amax.grids == [4 * sms, 3 * sms, 3 * sms]   # asked 4 an SM, 3 fit
    small = _Kernel(32)
    for _ in range(2):                                 # fits more than asked: the ask stands
        _launch.launch_persistent(small, 4096, dev, 4, (7, True), num_warps=4)
    assert small.grids == [4 * sms] * 2
    other = _Kernel(152)                               # another signature learns its own fit
    _launch.launch_persistent(other, 100, dev, 4, (8, True), num_warps=4)
    assert other.grids == [100]                        # and never more programs than tiles
    monkeypatch.setitem(_launch.FIT, "on", False)      # the A/B switch: as asked
    _launch.launch_persistent(amax, 4096, dev, 4, (7, True), num_warps=4)
    assert amax.grids[-1] == 4 * sms
