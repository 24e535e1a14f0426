"""Block-sparse attention as torch custom ops: vsa::forward, vsa::backward.

The ops carry fake (meta) implementations and autograd, so torch.compile
(fullgraph=True) captures a model that calls them, and they never
synchronize the device. The public functions are block_sparse_attn and
block_sparse_attn_from_mask (contract: README.md, "The op contract").
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from vsa import _C
from vsa._args import LAYOUTS, invalid_argument, lse_shape, scale_argument
from vsa._tensors import (expect_same_device, index_tensor, kernel_ready, optional_index_tensor,
                          optional_tensors)
from vsa.dispatch import launch
from vsa.metadata import map_to_index


def _new_lse(q: Tensor, layout: str, need_lse: bool) -> Tensor:
    # Without need_lse the op still returns a tensor (custom ops cannot return
    # None); an empty one costs nothing.
    shape = lse_shape(q.shape, layout) if need_lse else (0,)
    return q.new_empty(shape, dtype=torch.float32)


@torch.library.custom_op("vsa::forward", mutates_args=())
def _forward(q: Tensor, k: Tensor, v: Tensor, q2k_idx: Tensor, q2k_num: Tensor,
             variable_block_sizes: Tensor, q_variable_block_sizes: Optional[Tensor], scale: float,
             need_lse: bool, layout: str, deterministic: bool) -> tuple[Tensor, Tensor]:
    # `deterministic` only travels to the backward (see _setup_context).
    q, k, v = kernel_ready(q), kernel_ready(k), kernel_ready(v)
    out = q.new_empty(q.shape)
    lse = _new_lse(q, layout, need_lse)
    launch(_C.forward, (q, k, v, q2k_idx, q2k_num, variable_block_sizes, q_variable_block_sizes),
           (out, lse if need_lse else None), layout, scale, need_lse)
    return out, lse


@_forward.register_fake
def _forward_fake(q, k, v, q2k_idx, q2k_num, variable_block_sizes, q_variable_block_sizes, scale,
                  need_lse, layout, deterministic):
    return q.new_empty(q.shape), _new_lse(q, layout, need_lse)


def _backward_kernel(q, k, v, q2k_idx, q2k_num, variable_block_sizes, q_variable_block_sizes, out,
                     lse, dout, dq_mean, dk_mean, dv_mean, dq, dk, dv, layout, scale, deterministic, stream):
    """_C.backward with the device scratch it asks for, from torch's caching allocator
    (the core allocates nothing; on CUDA the scratch holds delta, the dq accumulator and
    the KV->Q lists)."""
    arrays = (q, k, v, q2k_idx, q2k_num, variable_block_sizes, q_variable_block_sizes, out, lse,
              dout)
    size = _C.backward_workspace_bytes(*arrays, dq, dk, dv, layout, scale, deterministic)
    workspace = dq.new_empty(size, dtype=torch.uint8) if size else None
    _C.backward(*arrays, dq_mean, dk_mean, dv_mean, workspace, dq, dk, dv, layout, scale, deterministic,
                stream)


@torch.library.custom_op("vsa::backward", mutates_args=())
def _backward(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
              q2k_idx: Tensor, q2k_num: Tensor, variable_block_sizes: Tensor,
              q_variable_block_sizes: Optional[Tensor], scale: float, layout: str,
              deterministic: bool, dq_mean: Optional[Tensor] = None, dk_mean: Optional[Tensor] = None,
              dv_mean: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor]:
    """The attention's gradients; dq_mean, dk_mean, dv_mean (the VSA layer's block-mean
    gradients, float32 [B, H(kv), N, D]) are added to each block's valid rows as mean / count
    in the same pass (vsa::BackwardParams)."""
    dout, q, k, v, out = (kernel_ready(t) for t in (dout, q, k, v, out))
    dq, dk, dv = q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)
    launch(_backward_kernel,
           (q, k, v, q2k_idx, q2k_num, variable_block_sizes, q_variable_block_sizes, out, lse, dout,
            dq_mean, dk_mean, dv_mean),
           (dq, dk, dv), layout, scale, deterministic)
    return dq, dk, dv


@_backward.register_fake
def _backward_fake(dout, q, k, v, out, lse, q2k_idx, q2k_num, variable_block_sizes,
                   q_variable_block_sizes, scale, layout, deterministic, dq_mean=None, dk_mean=None,
                   dv_mean=None):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _setup_context(ctx, inputs, output):
    (q, k, v, q2k_idx, q2k_num, variable_block_sizes, q_variable_block_sizes, scale, _need_lse, layout,
     deterministic) = inputs
    out, lse = output
    # The backward computes no gradient through lse; marking it keeps a loss
    # that uses lse from getting a silently wrong gradient.
    ctx.mark_non_differentiable(lse)
    # Nor is a zero tensor filled for lse's gradient before every backward (a kernel launch and
    # an allocation of its own): it arrives as None.
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(q, k, v, out, lse, q2k_idx, q2k_num, variable_block_sizes,
                          q_variable_block_sizes)
    ctx.scale, ctx.layout, ctx.deterministic = scale, layout, deterministic


def _autograd_backward(ctx, dout, _dlse):
    if dout is None:  # asked with no output gradient at all (gradcheck checks this case)
        return (None,) * 11
    q, k, v, out, lse, q2k_idx, q2k_num, variable_block_sizes, q_variable_block_sizes = ctx.saved_tensors
    dq, dk, dv = _backward(dout, q, k, v, out, lse, q2k_idx, q2k_num, variable_block_sizes,
                           q_variable_block_sizes, ctx.scale, ctx.layout, ctx.deterministic)
    return dq, dk, dv, None, None, None, None, None, None, None, None


_forward.register_autograd(_autograd_backward, setup_context=_setup_context)


def block_sparse_attn(q: Tensor, k: Tensor, v: Tensor, q2k_idx: Tensor, q2k_num: Tensor,
                      variable_block_sizes: Tensor, *, scale: Optional[float] = None,
                      need_lse: bool = True, layout: str = "bhsd",
                      deterministic: Optional[bool] = None,
                      q_variable_block_sizes: Optional[Tensor] = None
                      ) -> tuple[Tensor, Optional[Tensor]]:
    """Every query block attends to its own list of KV blocks (README.md, "The op contract").

    q: [B, H, Sq, D] ("bhsd") or [B, Sq, H, D] ("bshd"); k, v: [B, Hkv, Skv, D]
    likewise, H % Hkv == 0. Any strides with unit stride on D.
    q2k_idx [B, H, NQ, max_kv], q2k_num [B, H, NQ], variable_block_sizes [NK]:
    any integer dtype. Returns (out, lse): out has q's shape and layout; lse is
    [B, H, Sq] float32 in base 2 (None when need_lse is False). lse is not
    differentiable; out is, on both backends.

    q_variable_block_sizes [NQ] (any integer dtype, values in [0, blk]; None: every
    query row is real): rows at offset >= q_variable_block_sizes[i] of query block i
    are padding. Their out rows are 0 and their lse the empty-row sentinel; they get
    zero dq and add nothing to dk/dv (their q and dout rows must be finite; out and
    lse there may hold anything). The CPU backend skips them entirely.

    deterministic: whether the backward's dq must be bitwise repeatable (dk and dv
    always are). None follows torch.use_deterministic_algorithms. On CUDA the
    repeatable dq comes from a dQ pass that sums each row in list order instead of
    float atomics; the Hopper kernels take that path at head dim 128 anyway (from dS
    tiles stored by the key pass, the faster path there).
    """
    expect_same_device("q", q, k=k, v=v, q2k_idx=q2k_idx, q2k_num=q2k_num,
                       variable_block_sizes=variable_block_sizes,
                       **optional_tensors(q_variable_block_sizes=q_variable_block_sizes))
    # The backward reads lse, so it is computed whenever a gradient may be asked.
    needs_grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    out, lse = _forward(q, k, v, index_tensor(q2k_idx, "q2k_idx"), index_tensor(q2k_num, "q2k_num"),
                        index_tensor(variable_block_sizes, "variable_block_sizes"),
                        optional_index_tensor(q_variable_block_sizes, "q_variable_block_sizes"),
                        scale_argument(scale), bool(need_lse or needs_grad), layout,
                        torch.are_deterministic_algorithms_enabled() if deterministic is None
                        else bool(deterministic))
    return out, (lse if need_lse else None)


def block_map_shape(q: Tensor, k: Tensor, variable_block_sizes: Tensor, layout: str) -> Optional[list[int]]:
    """The [B, H, NQ, NK] of a block map for q, k and variable_block_sizes (blk = Skv / NK, as the
    core infers it), or None where they give none: the core then names them by their own shapes."""
    if q.dim() != 4 or k.dim() != 4 or variable_block_sizes.dim() != 1 or layout not in LAYOUTS:
        return None
    seq = 2 if layout == "bhsd" else 1
    num_kv_blocks = variable_block_sizes.shape[0]
    if num_kv_blocks < 1 or k.shape[seq] % num_kv_blocks:
        return None
    block = k.shape[seq] // num_kv_blocks
    if block < 1 or q.shape[seq] % block:
        return None
    return [q.shape[0], q.shape[3 - seq], q.shape[seq] // block, num_kv_blocks]


def block_sparse_attn_from_mask(q: Tensor, k: Tensor, v: Tensor, block_map: Tensor,
                                variable_block_sizes: Tensor, *, scale: Optional[float] = None,
                                need_lse: bool = True, layout: str = "bhsd",
                                deterministic: Optional[bool] = None
                                ) -> tuple[Tensor, Optional[Tensor]]:
    """block_sparse_attn with the lists given as a bool block_map [B, H, NQ, NK].

    The compaction (map_to_index) is an op of its own, so torch.compile
    captures it together with the attention.
    """
    # map_to_index lists a map's columns whatever their count: a map of fewer than NK would never
    # list the last blocks, silently; its other axes the core would name as q2k_idx's, an internal name.
    want = block_map_shape(q, k, variable_block_sizes, layout)
    if want is not None and list(block_map.shape) != want:
        raise invalid_argument("block_map.shape", f"[B, H, NQ, NK] = {want} (q's batch, heads and query blocks; "
                               f"NK = {want[3]}, variable_block_sizes' length)", list(block_map.shape))
    q2k_idx, q2k_num = map_to_index(block_map)
    return block_sparse_attn(q, k, v, q2k_idx, q2k_num, variable_block_sizes, scale=scale,
                             need_lse=need_lse, layout=layout, deterministic=deterministic)
