"""The `vsa` command dispatcher."""

import subprocess
import sys
import types

import vsa
from vsa import cli


def test_info(capsys):
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"vsa {vsa.__version__}" in out
    assert f"cuda kernels: {'yes' if vsa.cuda_compiled() else 'no'}" in out


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
