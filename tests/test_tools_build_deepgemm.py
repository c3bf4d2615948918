"""``tools/build_deepgemm.py``'s steps that need no network, compiler or GPU."""

from __future__ import annotations

from script_loader import load_script  # (tests/ is on sys.path)


def _tool():
    return load_script("tools/build_deepgemm.py")


def test_link_headers_puts_cutlass_where_the_jit_includes_from(tmp_path):
    """DeepGEMM's JIT compiles with ``deep_gemm/include`` on its include path, so CUTLASS's
    ``cute`` and ``cutlass`` must appear there; a stale link is replaced."""
    tool = _tool()
    for name in ("cute", "cutlass"):
        (tmp_path / "third-party" / "cutlass" / "include" / name).mkdir(parents=True)
        (tmp_path / "third-party" / "cutlass" / "include" / name / f"{name}.hpp").write_text("")
    include = tmp_path / "deep_gemm" / "include"
    include.mkdir(parents=True)
    (include / "cute").symlink_to(tmp_path / "nowhere")          # stale
    tool.link_headers(str(tmp_path))
    tool.link_headers(str(tmp_path))                              # again: no error
    for name in ("cute", "cutlass"):
        assert (include / name / f"{name}.hpp").exists()
    assert tool.REVISION == "54e22612409371d6364144b69086735beb54e98b"
