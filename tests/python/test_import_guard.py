"""The import guard: with FastVideo's older `vsa` package first on sys.path, `import vsa`
and the `vsa` command fail with a message that says so; our own package imports as usual,
with a warning where FastVideo's files share its folder.

Each case runs a fresh interpreter, since the guard is installed at start-up by the
vsa_attention_guard.pth file that `pip install` puts into site-packages.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import vsa

FASTVIDEO_SUMMARY = "Video Sparse Attention Kernel Used in FastVideo"


def python(code, *, pythonpath=None, argv=None):
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)  # PYTHONPATH entries come before site-packages
    return subprocess.run(argv or [sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.fixture
def fastvideo_vsa(tmp_path):
    """A stand-in for FastVideo's wheel: its `vsa` package and its dist-info."""
    package = tmp_path / "vsa"
    package.mkdir()
    # Importing it must never get this far: its body would then say so.
    (package / "__init__.py").write_text("raise SystemExit('FastVideo vsa was imported')\n")
    (package / "block_sparse_wrapper.py").write_text("")
    info = tmp_path / "vsa-0.0.4.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vsa\nVersion: 0.0.4\n"
                                   f"Summary: {FASTVIDEO_SUMMARY}\n")
    return tmp_path


def test_our_package_is_marked_and_guarded():
    result = python("import sys, vsa, _vsa_attention_guard as g; print(vsa.__distribution__,"
                    " any(isinstance(f, g.VsaGuard) for f in sys.meta_path))")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["vsa-attention", "True"], "the .pth did not install the guard"
    assert vsa.__distribution__ == "vsa-attention"


def test_fastvideo_vsa_first_on_the_path_fails_clearly(fastvideo_vsa):
    result = python("import vsa", pythonpath=fastvideo_vsa)
    assert result.returncode != 0
    assert "FastVideo vsa was imported" not in result.stderr
    assert "ImportError: import vsa:" in result.stderr
    assert str(fastvideo_vsa / "vsa" / "__init__.py") in result.stderr
    assert "FastVideo's older kernel wheel (PyPI 'vsa 0.0.4')" in result.stderr
    assert "pip uninstall -y vsa vsa-attention" in result.stderr


def test_an_unknown_vsa_first_on_the_path_is_named_too(tmp_path):
    (tmp_path / "vsa").mkdir()
    (tmp_path / "vsa" / "__init__.py").write_text("")
    result = python("import vsa", pythonpath=tmp_path)
    assert result.returncode != 0
    assert "is not vsa-attention's" in result.stderr


def test_the_command_says_the_same(fastvideo_vsa):
    script = Path(sysconfig.get_path("scripts")) / "vsa"
    if not script.exists():
        pytest.skip(f"no `vsa` console script at {script}")
    result = python(None, pythonpath=fastvideo_vsa, argv=[str(script), "info"])
    assert result.returncode == 1
    assert result.stderr.startswith("import vsa: ") and "FastVideo" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_command_runs_ours():
    script = Path(sysconfig.get_path("scripts")) / "vsa"
    if not script.exists():
        pytest.skip(f"no `vsa` console script at {script}")
    result = python(None, argv=[str(script), "info"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"vsa {vsa.__version__} (vsa-attention, ")


def test_fastvideo_files_beside_ours_are_warned_about(tmp_path):
    """FastVideo's wheel installed first, then ours over it: ours imports, with a warning."""
    shutil.copytree(Path(vsa.__file__).parent, tmp_path / "vsa",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "vsa" / "block_sparse_wrapper.py").write_text("")
    result = python("import vsa; print(vsa.__file__)", pythonpath=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(tmp_path / "vsa" / "__init__.py")
    assert "RuntimeWarning: vsa: FastVideo's older 'vsa' wheel is installed in" in result.stderr
    assert "`pip uninstall vsa` would delete files of vsa-attention" in result.stderr
