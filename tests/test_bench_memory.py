"""The peak-memory replay of benchmarks/bench_memory.py on hand-made allocator traces."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_memory


def _ev(action, addr, size, fname="/x/model.py", line=1):
    return {"action": action, "addr": addr, "size": size,
            "frames": [{"filename": "/usr/lib/torch/nn/functional.py", "line": 3, "name": "f"},
                       {"filename": fname, "line": line, "name": "g"}]}


def test_peak_is_found_and_its_live_set_is_the_one_at_the_peak():
    events = [_ev("alloc", 1, 100), _ev("alloc", 2, 50, line=7), _ev("free_requested", 1, 100),
              _ev("free_completed", 1, 100), _ev("alloc", 3, 30), _ev("free_requested", 2, 50)]
    peak, before, live = bench_memory.peak_live(events, before_bytes=1000)
    assert peak == 1150 and before == 1000
    assert sorted(live) == [1, 2]                     # 3 came after the peak, 1 was still alive
    sites = bench_memory.by_site(live)
    assert sites == {"model.py:1 g": 100, "model.py:7 g": 50}   # torch's own frame skipped


def test_a_free_of_an_earlier_allocation_lowers_the_before_share():
    events = [_ev("free_requested", 9, 400), _ev("free_completed", 9, 400), _ev("alloc", 1, 300)]
    peak, before, live = bench_memory.peak_live(events, before_bytes=1000)
    assert peak == 1000 and before == 1000 and live == {}     # the peak is the start
    events.append(_ev("alloc", 2, 200))
    peak, before, live = bench_memory.peak_live(events, before_bytes=1000)
    assert peak == 1100 and before == 600 and sorted(live) == [1, 2]
