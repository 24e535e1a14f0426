"""vsa: block-sparse attention for Video Sparse Attention.

The torch API (custom ops with autograd and torch.compile support, metadata,
the VSA layer) loads when torch is installed; vsa.numpy_forward and the build
facts work without it.
"""

try:
    # The extension links the OpenBLAS of the scipy-openblas32 wheel by its soname
    # (pyproject.toml); importing the wheel loads it process-wide first, wherever pip
    # put it. A build against the system's OpenBLAS (VSA_OPENBLAS=system) needs no wheel.
    import scipy_openblas32  # noqa: F401
except ModuleNotFoundError as missing:
    if missing.name != "scipy_openblas32":
        raise

from vsa._C import (UnsupportedError, cpu_backend_info, cpu_threads, cuda_archs, cuda_compiled,
                    cuda_forward_kernel, set_cpu_threads)
from vsa._C import kEmptyRowLse as EMPTY_ROW_LSE
from vsa.numpy_api import numpy_forward

__version__ = "0.1.0"
# The PyPI distribution's name (`import vsa` stays). The import guard installed beside
# this package (_vsa_attention_guard) looks for this exact line to tell our `vsa` from
# FastVideo's older `vsa` wheel: keep it as it is.
__distribution__ = "vsa-attention"

__all__ = ["EMPTY_ROW_LSE", "UnsupportedError", "cpu_backend_info", "cpu_threads", "cuda_archs",
           "cuda_compiled", "cuda_forward_kernel", "numpy_forward", "set_cpu_threads"]

try:
    import torch as _torch
except ModuleNotFoundError as missing:  # only torch itself missing; errors inside torch propagate
    if missing.name != "torch":
        raise
    _torch = None

if _torch is not None:
    from vsa.attention import block_sparse_attn, block_sparse_attn_from_mask
    from vsa.dispatch import select_backend
    from vsa.layer import video_sparse_attn
    from vsa.metadata import (VSAMetadata, build_vsa_metadata, invert_indices, map_to_index,
                              pack_varlen_index, tile, topk_to_index, untile)
    from vsa.support import Support, is_supported
    from vsa.varlen import block_sparse_attn_varlen

    __all__ += [
        "Support", "VSAMetadata", "block_sparse_attn", "block_sparse_attn_from_mask",
        "block_sparse_attn_varlen", "build_vsa_metadata", "invert_indices", "is_supported",
        "map_to_index", "pack_varlen_index", "select_backend", "tile", "topk_to_index", "untile",
        "video_sparse_attn",
    ]
