"""Stand-ins for the parts of fastvideo_kernel that vsa does not implement.

Each raises vsa.UnsupportedError naming the FastVideo function when called
(or, for a class, when constructed), so code that reaches one fails loudly
instead of getting some other computation's answer. Importing them works, as
it does for FastVideo's own optional backends, so modules that merely import
these names still load.
"""

from __future__ import annotations

from vsa import UnsupportedError

_WHAT_VSA_DOES = ("vsa serves only FastVideo's Video Sparse Attention API (block-sparse attention, "
                  "video_sparse_attn, the VSA metadata helpers)")


def _error(qualified_name: str) -> UnsupportedError:
    return UnsupportedError(f"vsa: fastvideo_kernel.{qualified_name} is not supported: {_WHAT_VSA_DOES}")


def unsupported_function(module: str, name: str):
    def refuse(*_args, **_kwargs):
        raise _error(f"{module}.{name}" if module else name)

    refuse.__name__ = refuse.__qualname__ = name
    refuse.__doc__ = "Not supported by vsa's fastvideo_kernel layer (raises vsa.UnsupportedError)."
    return refuse


def unsupported_class(module: str, name: str) -> type:
    def refuse(cls, *_args, **_kwargs):
        raise _error(f"{module}.{name}" if module else name)

    return type(name, (), {"__new__": refuse, "__doc__": "Not supported by vsa's fastvideo_kernel layer "
                                                         "(constructing it raises vsa.UnsupportedError)."})
