"""Session 49, call 6: does cuBLASLt's 1×128 · 1×128 time at 125m's MLP weight gradients depend
on what ran before it in the process? (168 µs in call 1 after the 1b and issue-12 GEMMs, and in
the training processes; 86-104 µs in call 5's process, which ran only 50m/125m shapes.)
Times cuBLASLt (graph-replayed) at 3072x768x16384 and 768x3072x16384, then after the 1b and
issue-12 wgrad/fprop GEMMs, then once more; with ``--deepgemm`` (call 7), once more after
DeepGEMM's 1d1d kernel has run at each probe shape. Prints one JSON line."""
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common                                              # noqa: E402
from bench_deepgemm import operands                        # noqa: E402
from microscale.kernels.gemm_fp8 import scaled_mm_fp8      # noqa: E402

dev = torch.device("cuda")


def cublas_us(role, n_in, n_out):
    qa, qb, _, out = operands(role, 16384, n_in, n_out, dev)
    return round(common.graph_ms(lambda: scaled_mm_fp8(qa, qb, out, path="torch")) * 1e3, 1)


probe = [("wgrad", 768, 3072), ("wgrad", 3072, 768), ("wgrad", 768, 768)]
big = [("wgrad", 2048, 2048), ("wgrad", 2048, 8192), ("wgrad", 4096, 14336),
       ("fprop", 4096, 14336), ("dgrad", 4096, 14336)]
out = {"first": [cublas_us(*p) for p in probe]}
out["big"] = [cublas_us(*p) for p in big]
out["after_big"] = [cublas_us(*p) for p in probe]
torch.cuda.empty_cache()
out["after_empty_cache"] = [cublas_us(*p) for p in probe]
if "--deepgemm" in sys.argv:           # call 7: DeepGEMM's 1d1d kernel at each shape, then again
    import deep_gemm as dg                 # noqa: E402
    from bench_deepgemm import run_one     # noqa: E402
    out["dg_first_call"] = [run_one(dg, "probe", r, 16384, i, o, dev, warm=True)["first_call_s"]
                            for r, i, o in probe]
    out["after_deepgemm"] = [cublas_us(*p) for p in probe]
print(json.dumps({"probe": probe, "big": big, **out}))
