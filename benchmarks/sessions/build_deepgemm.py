"""Build DeepGEMM's C++ module in place, on the GPU machine (session 48; not a dependency).

    python3 benchmarks/sessions/build_deepgemm.py .deps/DeepGEMM [plain|static]

The source tree (DeepGEMM with CUTLASS's and fmt's ``include/`` under ``third-party/``) is
carried there; this compiles ``csrc/python_api.cpp`` with torch's extension builder (what
DeepGEMM's setup.py does, at -O1 to save device time: the module is host code that launches
JIT-compiled kernels) and puts ``_C.so`` in the package, so ``PYTHONPATH=<tree>`` imports it.
"""
import os
import shutil
import sys
import time

from torch.utils.cpp_extension import CUDA_HOME, load

root = os.path.abspath(sys.argv[1])
variant = sys.argv[2] if len(sys.argv) > 2 else "plain"  # "static": libstdc++ linked in;
# "symbolic": that, bound to the module's own copy (-Bsymbolic); "debug": -O0 -g
build = os.path.join(root, f"build_C_{variant}")
os.makedirs(build, exist_ok=True)
t0 = time.time()
mod = load(name="_C", sources=[os.path.join(root, "csrc/python_api.cpp")],
           extra_include_paths=[f"{CUDA_HOME}/include", f"{CUDA_HOME}/include/cccl",
                                os.path.join(root, "deep_gemm/include"),
                                os.path.join(root, "third-party/cutlass/include"),
                                os.path.join(root, "third-party/fmt/include")],
           extra_cflags=["-std=c++17", "-O0" if variant == "debug" else "-O1", "-fPIC",
                         "-Wno-psabi", "-Wno-deprecated-declarations"]
           + (["-g"] if variant == "debug" else []),
           extra_ldflags=[f"-L{CUDA_HOME}/lib64", "-lcudart", "-lnvrtc"]
           + (["-static-libstdc++", "-static-libgcc"] if variant in ("static", "symbolic") else [])
           + (["-Wl,-Bsymbolic", "-Wl,--exclude-libs,ALL"] if variant == "symbolic" else []),
           with_cuda=True, build_directory=build, verbose=False)
shutil.copy(mod.__file__, os.path.join(root, "deep_gemm", "_C.so"))
print(f"built {mod.__file__} in {time.time() - t0:.0f} s")
