"""is_supported: can block_sparse_attn run these tensors here?

Static facts only — shapes, dtypes, strides, device, arch, layout — from
tensor attributes, never their contents or data pointers: no data read, no
device sync. It works on meta and fake tensors, and torch.compile traces it
without a graph break (the answer becomes a constant of the compiled graph,
guarded by the shapes), so it can sit on a per-layer dispatch path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

from vsa import _C
from vsa._args import scale_argument
from vsa._tensors import expect_same_device, index_dtype, optional_tensors, strides_need_copy
from vsa.dispatch import select_backend


@dataclass(frozen=True)
class Support:
    ok: bool
    reason: str = ""  # why not, when not ok

    def __bool__(self) -> bool:
        return self.ok


def _contiguous_strides(shape) -> list[int]:
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return strides[::-1]


def _spec(shape, strides, dtype: torch.dtype, device_type: str, index: int):
    return (list(shape), list(strides), str(dtype).removeprefix("torch."), device_type, index)


def _device(t: Tensor, backend: str) -> tuple[str, int]:
    # With the CPU backend forced, the op copies every tensor to the host.
    return ("cpu", 0) if backend == "cpu" else (t.device.type, t.device.index or 0)


def _sequence_spec(t: Tensor, backend: str):
    # Strides as the op will pass them: it copies tensors the kernels cannot
    # read (also those whose data pointer is misaligned; a copy has the same
    # shape, so the answer does not depend on the pointer).
    strides = _contiguous_strides(t.shape) if strides_need_copy(t) else t.stride()
    return _spec(t.shape, strides, t.dtype, *_device(t, backend))


def _index_spec(t: Tensor, backend: str):
    # As the op passes lists: converted by index_tensor, contiguous.
    return _spec(t.shape, _contiguous_strides(t.shape), index_dtype(t.dtype), *_device(t, backend))


def _implied_list_shapes(q: Tensor, k: Tensor, variable_block_sizes: Tensor, layout: str):
    """Shapes of well-formed q2k_idx / q2k_num for these q/k/vbs (one entry per row).

    When the shapes cannot imply them, the core rejects q, k or vbs first.
    """
    seq_axis, head_axis = (2, 1) if layout == "bhsd" else (1, 2)
    rows = [1, 1, 1]
    if q.dim() == 4 and k.dim() == 4 and variable_block_sizes.dim() == 1:
        nk, skv = variable_block_sizes.shape[0], k.shape[seq_axis]
        block = skv // nk if nk and skv % nk == 0 else 0
        if block:
            rows = [q.shape[0], q.shape[head_axis], max(q.shape[seq_axis] // block, 1)]
    return [*rows, 1], rows


def is_supported(q: Tensor, k: Tensor, v: Tensor, variable_block_sizes: Tensor,
                 q2k_idx: Optional[Tensor] = None, q2k_num: Optional[Tensor] = None, *,
                 scale: Optional[float] = None, layout: str = "bhsd") -> Support:
    """Whether block_sparse_attn can run on these tensors: a Support (truthy when ok)
    whose `reason` says why not.

    Without q2k_idx / q2k_num, well-formed lists are assumed. Index values are
    not looked at (reading them could sync the device): the op checks them
    on the CPU backend.
    """
    try:
        # As block_sparse_attn refuses them before any backend sees the tensors.
        expect_same_device("q", q, k=k, v=v, variable_block_sizes=variable_block_sizes,
                           **optional_tensors(q2k_idx=q2k_idx, q2k_num=q2k_num))
        backend = select_backend(q.device)
        scale_value = scale_argument(scale)
    except ValueError as e:
        return Support(False, str(e))
    if q2k_idx is None or q2k_num is None:
        idx_shape, num_shape = _implied_list_shapes(q, k, variable_block_sizes, layout)
        idx, num = (_spec(shape, _contiguous_strides(shape), torch.int32, *_device(q, backend))
                    for shape in (idx_shape, num_shape))
    else:
        idx, num = _index_spec(q2k_idx, backend), _index_spec(q2k_num, backend)
    ok, reason = _static_support(
        _sequence_spec(q, backend), _sequence_spec(k, backend), _sequence_spec(v, backend),
        idx, num, _index_spec(variable_block_sizes, backend), layout, scale_value)
    return Support(ok, reason)


@torch.compiler.assume_constant_result
def _static_support(*specs_layout_scale) -> tuple[bool, str]:
    # Every argument is a plain Python value, so under torch.compile the call
    # runs once at trace time and its answer is a constant.
    return tuple(_C.supported(*specs_layout_scale))


def cuda_forward_kernel_or_reason(device_index: int) -> str:
    """The CUDA kernel family vsa runs on this device ('sm90', 'sm80', or what
    VSA_CUDA_KERNEL names: 'sm90v1', 'sm90ws'), or 'none (why)' when there is none."""
    try:
        return _C.cuda_forward_kernel(device_index)
    except (_C.UnsupportedError, RuntimeError, ValueError) as e:
        return f"none ({e})"
