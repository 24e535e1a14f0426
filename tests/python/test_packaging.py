"""The distribution (pyproject.toml): what `pip install .` asks for, and what it installs."""

import __future__
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch
from packaging.requirements import Requirement
from packaging.version import Version

import vsa._C
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


def test_the_wheel_installs_the_package_and_the_guard_only(tmp_path):
    # scikit-build-core installs the CMake project into the root of site-packages: every install
    # rule outside pyproject's install.components put include/vsa, lib/libvsa.a and lib/cmake/vsa
    # there (the C++ package, its config naming the build environment's OpenBLAS by path).
    # Configured here as pyproject.toml configures it; the install needs built files, so the
    # installed extension and an empty archive stand in for them.
    if shutil.which("cmake") is None:
        pytest.skip("needs cmake")
    pytest.importorskip("nanobind")
    settings = pyproject()["tool"]["scikit-build"]
    defines = {**settings["cmake"]["define"], "VSA_ENABLE_CUDA": "OFF"}
    build, prefix = tmp_path / "build", tmp_path / "site-packages"
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), *generator, f"-DPython_EXECUTABLE={sys.executable}",
                    *(f"-D{name}={value}" for name, value in defines.items())],
                   check=True, capture_output=True, timeout=300)
    module = "_C" + sysconfig.get_config_var("EXT_SUFFIX")
    shutil.copy(vsa._C.__file__, build / "bindings" / module)
    (build / "libvsa.a").touch()
    for component in settings.get("install", {}).get("components") or [None]:
        subprocess.run(["cmake", "--install", str(build), "--prefix", str(prefix),
                        *(["--component", component] if component else [])],
                       check=True, capture_output=True, timeout=300)
    installed = sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*") if p.is_file())
    assert installed == sorted([f"vsa/{module}", "_vsa_attention_guard.py", "vsa_attention_guard.pth"])
