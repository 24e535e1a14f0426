"""fastvideo_kernel.block_sparse_attn_sm100a: FastVideo's Blackwell-only forward.

vsa has no separate sm_100a entry point: its own kernels (built for sm_100a too)
serve every block-sparse call through block_sparse_attn. So is_supported says
no, and FastVideo code takes its general path, which is vsa; calling the
function directly raises vsa.UnsupportedError.
"""

from __future__ import annotations

from torch import Tensor

from vsa.compat.fastvideo_kernel._unsupported import unsupported_function

block_sparse_attn_sm100a = unsupported_function("block_sparse_attn_sm100a", "block_sparse_attn_sm100a")


def is_supported(q: Tensor, variable_block_sizes: Tensor) -> bool:
    """Always False: use block_sparse_attn / block_sparse_attn_from_indices (vsa's kernels)."""
    return False
