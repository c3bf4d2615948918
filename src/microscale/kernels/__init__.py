"""Triton kernels, each registered with :func:`microscale.backend.register_kernel` under the
name and signature of the reference op it replaces (see :mod:`microscale.backend`).

Importing this package registers them. Quantization kernels live in ``quant_nvfp4``,
``quant_mx``, ``quant_fp8`` and ``quant_fp8_tensor`` (``quant_many``, ``quant_many_nvfp4``,
``quant_many_mx``: many weights in one or two launches); the GEMMs register from ``gemm_fp8``
(FP8 blockwise/tensorwise) and ``gemm_block`` (NVFP4/MXFP4/MXFP8: Blackwell's native GEMM,
the FP8 tensor-core MXFP8 kernel, the bf16 emulation; per-shape choice in ``gemm_paths``);
``grouped`` is the sync-free MoE path.
"""

import importlib

from . import quant_fp8, quant_fp8_tensor, quant_many, quant_mx, quant_nvfp4  # noqa: F401
from . import quant_many_mx, quant_many_nvfp4  # noqa: F401,E402
from . import grouped  # noqa: F401,E402  (the sync-free MoE path; registers itself)

for _name in ("microscale.kernels.gemm_block", "microscale.kernels.gemm_fp8"):
    try:
        importlib.import_module(_name)
    except ModuleNotFoundError as _err:  # only that module missing is tolerated
        if _err.name != _name:
            raise
