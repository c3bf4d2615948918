"""tools/seq_layer.py: a profiled step's launches cut into one layer's, and summed by name."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "seq_layer.py"


def _tool():
    spec = importlib.util.spec_from_file_location("seq_layer", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_layer_parts_cut_at_attention_and_sum_by_name():
    sl = _tool()
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
