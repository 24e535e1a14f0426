"""FastVideo's fastvideo_kernel API, served by vsa (docs/fastvideo-compat.md).

The same public names and signatures as fastvideo_kernel 0.3.2, returning the
same things: (out, M) tuples with M the base-2 log-sum-exp [B, H, S]. The
Video Sparse Attention part runs on vsa's ops; the rest of FastVideo's
package (sliding-tile attention, MoBA, the turbodiffusion int8/norm ops) is
present by name only and raises vsa.UnsupportedError when used.
vsa.compat.install() makes `import fastvideo_kernel` resolve here.
"""

from vsa.compat.fastvideo_kernel.version import __version__
from vsa.compat.fastvideo_kernel.ops import sliding_tile_attention, video_sparse_attn, video_sparse_attn_bshd
from vsa.compat.fastvideo_kernel.block_sparse_attn import block_sparse_attn, block_sparse_attn_from_indices
from vsa.compat.fastvideo_kernel.vmoba import moba_attn_varlen, process_moba_input, process_moba_output
from vsa.compat.fastvideo_kernel.turbodiffusion_ops import (FastLayerNorm, FastRMSNorm, Int8Linear, int8_linear,
                                                            int8_quant)
from vsa.compat.fastvideo_kernel.block_sparse_attn_varlen import block_sparse_attn_varlen
from vsa.compat.fastvideo_kernel.vsa_utils import (VSA_TILE_SIZE, build_vsa_metadata, construct_variable_block_sizes,
                                                   get_non_pad_index, get_reverse_tile_partition_indices,
                                                   get_tile_partition_indices)

__all__ = [
    "sliding_tile_attention", "video_sparse_attn", "video_sparse_attn_bshd", "block_sparse_attn",
    "block_sparse_attn_from_indices", "block_sparse_attn_varlen", "moba_attn_varlen", "process_moba_input",
    "process_moba_output", "Int8Linear", "FastRMSNorm", "FastLayerNorm", "int8_linear", "int8_quant",
    "VSA_TILE_SIZE", "get_tile_partition_indices", "get_reverse_tile_partition_indices",
    "construct_variable_block_sizes", "get_non_pad_index", "build_vsa_metadata", "__version__",
]
