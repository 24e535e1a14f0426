"""pytest plugin: run FastVideo's own kernel tests, unchanged, on vsa.

    python -m pytest -p vsa.compat.pytest_plugin path/to/fastvideo-kernel/tests

Before collection it calls vsa.compat.install(), so every
`import fastvideo_kernel...` in the tests resolves to vsa's layer, and the
report header says where the real package is (it must not be what runs).

--vsa-stand-in-flash-attn-cute: FastVideo's VSA-256 tests (and the "cute"
cases of the VSA-128 ones) skip themselves unless flash_attn.cute.block_sparsity
imports, since in FastVideo they target its optional FA4 CuTe backend. vsa
serves those entry points itself, so with this option, and only where no real
flash_attn is installed, the plugin registers empty placeholder modules under
those names: the skip guard passes and the tests check vsa's answers against
their torch references. Any attribute read from a placeholder raises
vsa.UnsupportedError, so nothing can mistake it for FA4.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from types import ModuleType

import vsa
from vsa import UnsupportedError
from vsa.compat import IMPORT_NAME, install

_CUTE_MODULES = ("flash_attn", "flash_attn.cute", "flash_attn.cute.block_sparsity")


class _Placeholder(ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise UnsupportedError(f"vsa: {self.__name__}.{name} is a placeholder registered by "
                               "vsa.compat.pytest_plugin (--vsa-stand-in-flash-attn-cute), not FA4")


def _stand_in_flash_attn_cute() -> str:
    if importlib.util.find_spec("flash_attn") is not None:
        return "a real flash_attn is installed: no placeholder registered"
    for name in _CUTE_MODULES:
        module = _Placeholder(name)
        module.__spec__ = importlib.machinery.ModuleSpec(name, loader=None, is_package=True)
        module.__path__ = []
        sys.modules[name] = module
    return "placeholders registered for " + ", ".join(_CUTE_MODULES) + " (vsa serves those tests)"


def pytest_addoption(parser):
    parser.getgroup("vsa").addoption(
        "--vsa-stand-in-flash-attn-cute", action="store_true",
        help="register placeholder flash_attn.cute modules so FastVideo's CuTe-targeted VSA tests run on vsa")


def pytest_configure(config):
    imported = IMPORT_NAME in sys.modules  # install() refuses it unless it is vsa's shim already
    real = None if imported else importlib.util.find_spec(IMPORT_NAME)
    install()
    config.addinivalue_line("markers", "cuda: FastVideo's marker of tests that need a CUDA GPU")
    status = ("already imported before the plugin ran" if imported else
              "not installed" if real is None else f"installed at {real.origin}, shadowed")
    notes = [f"vsa.compat: '{IMPORT_NAME}' served by vsa {vsa.__version__} ({vsa.__file__})",
             f"vsa.compat: real {IMPORT_NAME}: {status}"]
    if config.getoption("--vsa-stand-in-flash-attn-cute"):
        notes.append("vsa.compat: flash_attn.cute: " + _stand_in_flash_attn_cute())
    config._vsa_compat_notes = notes


def pytest_report_header(config):
    return getattr(config, "_vsa_compat_notes", [])
