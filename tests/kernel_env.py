"""What the kernel tests can run here, shared by the MXFP8 kernel test files.

``RUNS``: Triton is installed and there is a CUDA device or Triton's interpreter
(``TRITON_INTERPRET=1``, how CI runs the kernels on CPU); ``DEV`` is where their tensors live.
"""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

HAS_TRITON = importlib.util.find_spec("triton") is not None
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
HAS_CUDA = torch.cuda.is_available()
RUNS = HAS_TRITON and (INTERPRET or HAS_CUDA)
needs_kernels = pytest.mark.skipif(not RUNS, reason="needs Triton and CUDA or TRITON_INTERPRET=1")
DEV = "cuda" if HAS_CUDA and not INTERPRET else "cpu"
TOL = 8e-3                                   # SPEC's GEMM tolerance (exact up to summation order)
E4, E5 = "mxfp8_e4m3", "mxfp8_e5m2"
