"""Build DeepGEMM in place for this Python and torch: faster GEMMs for fp8_blockwise.

DeepGEMM (github.com/deepseek-ai/DeepGEMM, MIT) is optional: where ``import deep_gemm`` works
on a Hopper GPU, microscale runs each FP8 blockwise GEMM of ``fp8_blockwise`` through it or
cuBLASLt, whichever a timing at the shape's first call finds faster
(``microscale/kernels/gemm_deepgemm.py``; on an H200 a 1b training step 1.183x -> 1.238x of
compiled bf16, 125m 0.933x -> 1.065x, across processes). It has no wheel; this builds it::

    python tools/build_deepgemm.py ~/src/DeepGEMM --clone     # clone (git, network) + build
    python tools/build_deepgemm.py ~/src/DeepGEMM             # build a tree you already have
    export PYTHONPATH=~/src/DeepGEMM:$PYTHONPATH               # then: python -c "import deep_gemm"

``--clone`` checks out the revision microscale was measured with (``REVISION``) and its
submodules (CUTLASS, fmt). The build compiles DeepGEMM's host module (``csrc/python_api.cpp``)
with torch's extension builder, needs a C++17 compiler and the CUDA toolkit (its kernels are
compiled at first use by ``nvcc``, cached in ``$DG_JIT_CACHE_DIR`` or ``~/.deep_gemm``), and
links the module with its own libstdc++ (``-static-libstdc++ -Wl,-Bsymbolic``): built plainly
on session 48's H200 image (Ubuntu 24.04, GCC 13.3, torch 2.11+cu130), its JIT's
``std::regex`` and stream formatting crashed inside libstdc++'s locale facets, most likely
because its libstdc++ references bound to another copy in the process. The variant after DIR:
``symbolic`` (default) that way, ``static`` without ``-Bsymbolic``, ``plain`` as DeepGEMM's own
setup does, ``debug`` at -O0 -g.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import time

REPO = "https://github.com/deepseek-ai/DeepGEMM.git"
REVISION = "54e22612409371d6364144b69086735beb54e98b"      # 2026-06-23, DeepGEMM 2.6.1


def clone(root: str) -> None:
    subprocess.run(["git", "clone", "--recursive", REPO, root], check=True)
    subprocess.run(["git", "checkout", REVISION], cwd=root, check=True)
    subprocess.run(["git", "submodule", "update", "--init", "--recursive"], cwd=root, check=True)


def link_headers(root: str) -> None:
    """CUTLASS's ``cute`` and ``cutlass`` headers where DeepGEMM's JIT includes them from."""
    for name in ("cute", "cutlass"):
        link = os.path.join(root, "deep_gemm", "include", name)
        if os.path.islink(link):
            os.unlink(link)
        if not os.path.exists(link):
            os.symlink(os.path.join(root, "third-party", "cutlass", "include", name), link)


def build(root: str, variant: str) -> str:
    from torch.utils.cpp_extension import CUDA_HOME, load
    static = variant in ("static", "symbolic")
    mod = load(name="_C", sources=[os.path.join(root, "csrc", "python_api.cpp")],
               extra_include_paths=[f"{CUDA_HOME}/include", f"{CUDA_HOME}/include/cccl",
                                    os.path.join(root, "deep_gemm", "include"),
                                    os.path.join(root, "third-party", "cutlass", "include"),
                                    os.path.join(root, "third-party", "fmt", "include")],
               extra_cflags=["-std=c++17", "-O0" if variant == "debug" else "-O1", "-fPIC",
                             "-Wno-psabi", "-Wno-deprecated-declarations"]
               + (["-g"] if variant == "debug" else []),
               extra_ldflags=[f"-L{CUDA_HOME}/lib64", "-lcudart", "-lnvrtc"]
               + (["-static-libstdc++", "-static-libgcc"] if static else [])
               + (["-Wl,-Bsymbolic", "-Wl,--exclude-libs,ALL"] if variant == "symbolic" else []),
               with_cuda=True, build_directory=_build_dir(root, variant), verbose=False)
    target = os.path.join(root, "deep_gemm", "_C.so")
    shutil.copy(mod.__file__, target)
    return target


def _build_dir(root: str, variant: str) -> str:
    path = os.path.join(root, f"build_C_{variant}")
    os.makedirs(path, exist_ok=True)
    return path


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root", help="DeepGEMM's source tree (made with --clone)")
    p.add_argument("--clone", action="store_true", help=f"git clone {REPO} at {REVISION[:7]}")
    p.add_argument("variant", nargs="?", default="symbolic",
                   choices=("symbolic", "static", "plain", "debug"))
    args = p.parse_args(argv)
    root = os.path.abspath(os.path.expanduser(args.root))
    if args.clone:
        clone(root)
    link_headers(root)
    t0 = time.time()
    target = build(root, args.variant)
    print(f"built {target} ({args.variant}) in {time.time() - t0:.0f} s; "
          f"use it with PYTHONPATH={root}")


if __name__ == "__main__":
    main()
