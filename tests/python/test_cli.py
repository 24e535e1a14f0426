"""The `vsa` command dispatcher."""

import subprocess
import sys
import types

import pytest

import vsa
from vsa import cli


def test_info(capsys):
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"vsa {vsa.__version__}" in out
    assert f"cuda kernels: {'yes' if vsa.cuda_compiled() else 'no'}" in out


def test_info_names_an_invalid_backend(monkeypatch, capsys):
    # The setting `vsa info` is run to check ended it with a traceback.
    monkeypatch.setenv("VSA_BACKEND", "gpu")
    assert cli.main(["info"]) == 1
    out = capsys.readouterr().out
    assert "cuda kernels:" in out
    assert "VSA_BACKEND: vsa: invalid argument 'VSA_BACKEND': expected auto, cpu or cuda, got 'gpu'" in out


def test_info_needs_no_torch():
    # The package imports without torch (vsa/__init__.py) and so do the build facts; `vsa info`
    # read VSA_BACKEND through vsa.dispatch, which imports torch.
    code = "import sys; sys.modules['torch'] = None; from vsa.cli import main; sys.exit(main(['info']))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "VSA_BACKEND: auto" in result.stdout


def test_usage_and_unknown_command(capsys):
    assert cli.main([]) == 2
    assert "usage: vsa" in capsys.readouterr().err
    assert cli.main(["--help"]) == 0
    assert "bench" in capsys.readouterr().out
    assert cli.main(["frobnicate"]) == 2
    assert "unknown command 'frobnicate'" in capsys.readouterr().err


def test_bench_forwards_its_arguments(monkeypatch):
    seen = []
    fake = types.ModuleType("vsa.bench.cli")
    fake.main = lambda argv: seen.append(argv) or 3
    monkeypatch.setitem(sys.modules, "vsa.bench.cli", fake)
    assert cli.main(["bench", "--case", "x", "-h"]) == 3
    assert seen == [["--case", "x", "-h"]]


def test_python_dash_m():
    result = subprocess.run([sys.executable, "-m", "vsa", "info"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("vsa ")


def test_forward_kernel_without_a_gpu_says_why():
    import torch

    from vsa.support import cuda_forward_kernel_or_reason
    if torch.cuda.is_available():
        pytest.skip("tests/python/test_cuda_forward.py checks the choice on GPUs")
    assert cuda_forward_kernel_or_reason(0).startswith("none (")
    expected = vsa.UnsupportedError if not vsa.cuda_compiled() else RuntimeError
    with pytest.raises(expected):
        vsa.cuda_forward_kernel(0)
