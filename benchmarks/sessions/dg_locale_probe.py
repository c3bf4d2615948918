"""One DeepGEMM 1d2d GEMM from torch-made operands, after importing ``sys.argv[1:]`` first
(session 48: which import breaks the C++ locale DeepGEMM's JIT parses with)."""
import importlib
import sys

for name in sys.argv[1:]:
    importlib.import_module(name)
import torch  # noqa: E402
import deep_gemm as dg  # noqa: E402

m = n = k = 2048
a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
sa = torch.rand(m, k // 128, device="cuda").t().contiguous().t()
sb = torch.rand(n // 128, k // 128, device="cuda")
d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
dg.fp8_gemm_nt((a, sa), (b, sb), d, recipe=(1, 128, 128))
torch.cuda.synchronize()
print("ok after", sys.argv[1:], float(d.float().abs().sum()))
