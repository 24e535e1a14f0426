"""The distribution (pyproject.toml): what `pip install .` asks for, and what it installs."""

import __future__
from pathlib import Path

import pytest
import torch
from packaging.requirements import Requirement
from packaging.version import Version

import vsa.attention
import vsa.layer_ops
import vsa.metadata

tomllib = pytest.importorskip("tomllib")  # Python 3.11 on

ROOT = Path(__file__).resolve().parents[2]


def pyproject():
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def requirement(name, lines):
    found = [r for r in map(Requirement, lines) if r.name == name]
    assert len(found) == 1, f"{name}: {lines}"
    return found[0]


def test_torch_floor_is_the_first_release_that_defines_vsas_ops():
    # The op modules declare their custom ops with postponed (string) annotations; torch.library's
    # schema inference evaluates those from torch 2.5 on. Under torch 2.4 `import vsa` raised
    # "infer_schema(func): Parameter q has unsupported type Tensor", and pip, asked for a bare
    # `torch`, keeps an installed 2.4.
    for module in (vsa.attention, vsa.metadata, vsa.layer_ops):
        assert module.__dict__.get("annotations") is __future__.annotations, module.__name__
    test_lines = [line for line in (ROOT / "requirements" / "test.txt").read_text().splitlines()
                  if line.strip() and not line.startswith("#")]
    for where, lines in (("pyproject.toml", pyproject()["project"]["dependencies"]),
                         ("requirements/test.txt", test_lines)):
        spec = requirement("torch", lines).specifier
        assert "2.4.1" not in spec and "2.5.0" in spec, f"{where}: torch{spec}"
        assert Version(torch.__version__).base_version in spec, f"{where}: torch{spec}"
