"""The plain forward pass on numpy arrays, without torch.

numpy has no bfloat16, so q/k/v are float32 (or float16) here; the CPU
backend computes. For autograd, torch.compile or CUDA use vsa.block_sparse_attn.
"""

from __future__ import annotations

import numpy as np

from vsa import _C
from vsa._args import invalid_argument, lse_shape, scale_argument


def _index_array(array, name: str) -> np.ndarray:
    """Integer metadata as a contiguous int32/int64 array (other integer types are converted
    as vsa._tensors.index_dtype converts them: never narrowed, so a value out of range stays so)."""
    array = np.asarray(array)
    if not np.issubdtype(array.dtype, np.integer):
        raise invalid_argument(f"{name}.dtype", "an integer dtype", array.dtype)
    if array.dtype not in (np.int32, np.int64):
        array = array.astype(np.int32 if array.dtype.itemsize <= 2 else np.int64)
    return np.ascontiguousarray(array)


def _kernel_array(array) -> np.ndarray:
    """q, k or v as the core reads it: in native byte order (DLPack has no other, so the binding
    refused a big-endian array with a TypeError) and with unit stride on the head dim (the only
    stride it needs); copied just when one is missing."""
    array = np.asarray(array)
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    return array if array.ndim == 0 or array.strides[-1] == array.itemsize else np.ascontiguousarray(array)


def numpy_forward(q, k, v, q2k_idx, q2k_num, variable_block_sizes, *, scale=None,
                  need_lse=True, layout="bhsd", q_variable_block_sizes=None):
    """Block-sparse attention forward on numpy arrays: returns (out, lse | None).

    Same contract as vsa.block_sparse_attn: out has q's shape; lse is
    [B, H, Sq] float32 in base 2; query rows past q_variable_block_sizes (when
    given) are padding, written as empty rows.
    """
    q, k, v = (_kernel_array(t) for t in (q, k, v))
    out = np.empty(q.shape, dtype=q.dtype)
    lse = np.empty(lse_shape(q.shape, layout), dtype=np.float32) if need_lse else None
    _C.forward(q, k, v, _index_array(q2k_idx, "q2k_idx"), _index_array(q2k_num, "q2k_num"),
               _index_array(variable_block_sizes, "variable_block_sizes"),
               None if q_variable_block_sizes is None
               else _index_array(q_variable_block_sizes, "q_variable_block_sizes"),
               out, lse, layout, scale_argument(scale), bool(need_lse), 0)
    return out, lse
