"""Preparing torch tensors for the kernels: what each accepts, and the
fewest copies that get there."""

from __future__ import annotations

from typing import Optional

import torch

from vsa._args import invalid_argument

_KERNEL_INT_DTYPES = (torch.int32, torch.int64)
# The CUDA kernels load rows with 16-byte vector loads.
_CUDA_ROW_ALIGNMENT = 16


def _is_integer(dtype: torch.dtype) -> bool:
    return not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool)


def index_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype integer metadata reaches the kernels in: int32/int64 as given,
    narrower integer dtypes (int8, int16, uint8, uint16) as int32, wider unsigned
    ones (uint32, uint64) as int64. Non-integer dtypes are returned unchanged
    (index_tensor refuses them)."""
    if not _is_integer(dtype) or dtype in _KERNEL_INT_DTYPES:
        return dtype
    # Never narrowed: a uint64 2^32 + j made int32 would be j, a valid block id, where the
    # core must refuse the value (int64 keeps it, or makes one past 2^63 negative, also refused).
    return torch.int32 if dtype.itemsize <= 2 else torch.int64


def index_tensor(t: torch.Tensor, name: str) -> torch.Tensor:
    """Integer metadata as a contiguous tensor of index_dtype.

    Converted once, here at the public boundary, so the forward and the
    backward ops share the result.
    """
    if not _is_integer(t.dtype):
        raise invalid_argument(f"{name}.dtype", "an integer dtype", t.dtype)
    return t.to(index_dtype(t.dtype)).contiguous()


def host_values(t: torch.Tensor, name: str) -> list:
    """Rank-1 integer metadata read on the host (the compat layer reads it there, as FastVideo
    does): checked first, since a 0-d, 2-D or float one failed in Python or in the binding with
    a TypeError ('object of type 'int' has no len()', 'incompatible function arguments')."""
    t = index_tensor(t, name)  # names a dtype that is no integer one
    if t.dim() != 1:
        raise invalid_argument(f"{name}.shape", "one axis", list(t.shape))
    return t.tolist()


def host_counts(t: torch.Tensor, name: str, block: int) -> list:
    """Rank-1 valid-token counts read on the host (host_values), each checked in [0, block] where
    the core's own check cannot name them as the caller passed them."""
    counts = host_values(t, name)
    for n, count in enumerate(counts):
        if not 0 <= count <= block:
            raise invalid_argument(name, f"values in [0, blk = {block}]", f"{count} at block {n}")
    return counts


def optional_index_tensor(t: Optional[torch.Tensor], name: str) -> Optional[torch.Tensor]:
    """index_tensor for optional metadata (None stays None)."""
    return None if t is None else index_tensor(t, name)


def optional_tensors(**tensors: Optional[torch.Tensor]) -> dict[str, torch.Tensor]:
    """The given tensors without the absent ones, for expect_same_device."""
    return {name: t for name, t in tensors.items() if t is not None}


def strides_need_copy(t: torch.Tensor) -> bool:
    """Whether the strides alone make a q/k/v-shaped tensor unreadable in place.

    Any strides work as long as the head dim (last axis) has unit stride; on
    CUDA every row must also start 16-byte aligned. Tensors the core rejects
    anyway (wrong rank) are left alone so its error names them.
    """
    if t.dim() != 4:
        return False
    if t.stride(-1) != 1:
        return True
    step = _CUDA_ROW_ALIGNMENT // t.element_size()
    return t.device.type == "cuda" and any(s % step for s in t.stride()[:-1])


def needs_copy(t: torch.Tensor) -> bool:
    """strides_need_copy, or (CUDA) a first row that is not 16-byte aligned."""
    if strides_need_copy(t):
        return True
    return t.dim() == 4 and t.device.type == "cuda" and t.data_ptr() % _CUDA_ROW_ALIGNMENT != 0


def kernel_ready(t: torch.Tensor) -> torch.Tensor:
    # clone, not contiguous(): a contiguous tensor with a misaligned pointer
    # would come back from contiguous() unchanged.
    return t.clone(memory_format=torch.contiguous_format) if needs_copy(t) else t


def expect_same_device(like: str, reference: torch.Tensor, **tensors: torch.Tensor) -> None:
    """Every tensor on the device of `reference` (named `like` in the message).

    Checked before an op is called: torch would otherwise dispatch a mixed call
    by the other device (for meta tensors: to the fake kernel, which computes
    nothing). The core checks devices too, but only once its kernel runs.
    """
    for name, t in tensors.items():
        if t.device != reference.device:
            raise invalid_argument(f"{name}.device", f"{reference.device} (as {like})", t.device)
