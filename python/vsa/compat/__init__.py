"""Drop-in layers that let code written for another library run on vsa.

vsa.compat.fastvideo_kernel mirrors the Video Sparse Attention API of
FastVideo's ``fastvideo_kernel`` package on vsa's ops (docs/fastvideo-compat.md).
install() puts it in sys.modules under the name ``fastvideo_kernel``, so
unmodified FastVideo code imports it:

    import vsa.compat
    vsa.compat.install()
    from fastvideo_kernel import video_sparse_attn   # served by vsa
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

IMPORT_NAME = "fastvideo_kernel"
# Every submodule of the shim, registered under fastvideo_kernel.<name> too:
# FastVideo code and tests import several of them by path.
SUBMODULES = ("block_sparse_attn", "block_sparse_attn_256", "block_sparse_attn_sm100a", "block_sparse_attn_varlen",
              "ops", "triton_kernels", "triton_kernels.index", "turbodiffusion_ops", "version", "vmoba", "vsa_utils")

__all__ = ["IMPORT_NAME", "install", "uninstall"]


def _shim() -> ModuleType:
    return importlib.import_module("vsa.compat.fastvideo_kernel")


def install(*, replace: bool = False) -> ModuleType:
    """Registers vsa.compat.fastvideo_kernel (and its submodules) as ``fastvideo_kernel``.

    Idempotent. If the real fastvideo_kernel is already imported, refuses
    (its functions may already be bound in other modules) unless replace=True,
    which also drops its other imported modules from sys.modules (they would
    still import by name). Returns the shim module.
    """
    shim = _shim()
    current = sys.modules.get(IMPORT_NAME)
    if current is not None and current is not shim and not replace:
        raise RuntimeError(
            f"vsa.compat.install: '{IMPORT_NAME}' is already imported from "
            f"{getattr(current, '__file__', current)!r}; call install() before anything imports it, "
            "or pass replace=True")
    # A replaced package's other modules (its extension `_C`, optional backends) would still
    # answer `import fastvideo_kernel.<name>` from sys.modules, beside vsa's.
    for name in [n for n in sys.modules if n.startswith(IMPORT_NAME + ".")]:
        if not getattr(sys.modules[name], "__name__", "").startswith(shim.__name__ + "."):
            del sys.modules[name]
    sys.modules[IMPORT_NAME] = shim
    for name in SUBMODULES:
        sys.modules[f"{IMPORT_NAME}.{name}"] = importlib.import_module(f"vsa.compat.fastvideo_kernel.{name}")
    return shim


def uninstall() -> None:
    """Removes what install() registered (the shim's own modules stay importable as vsa.compat.*)."""
    shim = sys.modules.get("vsa.compat.fastvideo_kernel")
    if shim is not None and sys.modules.get(IMPORT_NAME) is shim:
        del sys.modules[IMPORT_NAME]
        for name in SUBMODULES:
            sys.modules.pop(f"{IMPORT_NAME}.{name}", None)
