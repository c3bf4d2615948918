"""tools/seq_layer.py: a profiled step's launches cut into one layer's, and summed by name."""

from __future__ import annotations

import pytest
from script_loader import load_script  # (tests/ is on sys.path)


def test_layer_parts_cut_at_attention_and_sum_by_name():
    sl = load_script("tools/seq_layer.py")
    seq = [["flash_fprop", 5, 0], ["gemm", 3, 1], ["amax", 1, 0], ["gemm", 2, 0],
           ["flash_fprop", 5, 0], ["gemm", 4, 0], ["flash_bprop", 9, 0], ["dq", 1, 0],
           ["flash_bprop", 9, 0]]
    parts = sl.layer_parts(seq, 0)
    assert [s[0] for s in parts["forward"]] == ["flash_fprop", "gemm", "amax", "gemm"]
    assert [s[0] for s in parts["backward"]] == ["flash_bprop", "dq"]
    assert sl.by_name(parts["forward"]) == {"flash_fprop": [1, 5.0], "gemm": [2, 5.0],
                                            "amax": [1, 1.0]}
    with pytest.raises(ValueError, match="no layer 1"):
        sl.layer_parts(seq, 1)
