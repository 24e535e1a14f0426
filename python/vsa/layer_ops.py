"""The VSA layer's stages as torch custom ops (fake kernels, autograd, no host sync):

- ``vsa::block_mean``: float32 block means over valid tokens; its backward is
  ``vsa::block_mean_backward``. ``vsa::block_means``: those of q, k and v in one
  call (on CUDA one launch), as the layer takes them.
- ``vsa::coarse_stage``: dense attention over the means plus each row's top-k
  block lists; its backward is ``vsa::coarse_stage_backward`` (dense
  attention's backward on the [B, H, N, D] means). The lists are not
  differentiable.
- ``vsa::gate_combine``: fine + coarse · gate; its backward is
  ``vsa::gate_combine_backward``.
- ``vsa::fine_stage_gated``: the fine stage with the gate combine in its
  kernel's epilogue, bitwise block_sparse_attn followed by gate_combine, one
  pass over the output fewer. Forward only (no autograd): the layer uses it
  when no gradient is needed. ``vsa::fine_stage_gated_training`` also returns
  what the backward needs, the attention alone (fine) and its lse, from the
  same pass: the layer's training path (layer_training.py).

docs/layer.md describes the arithmetic and why it gives the same block lists
on every backend.
"""

from __future__ import annotations

import re
from typing import Optional, Sequence

import torch
from torch import Tensor

from vsa import _C, UnsupportedError
from vsa._tensors import kernel_ready
from vsa.attention import _new_lse
from vsa.dispatch import launch


def _bhsd(shape, layout: str) -> tuple[int, int, int, int]:
    """(B, H, S, D) of a q/k/v shape in either layout (zeros for a shape the core will reject)."""
    if len(shape) != 4:
        return (0, 0, 0, 0)
    batch, second, third, dim = shape
    return (batch, second, third, dim) if layout == "bhsd" else (batch, third, second, dim)


def _new_means(x: Tensor, blocks: int, layout: str) -> Tensor:
    batch, heads, _, dim = _bhsd(x.shape, layout)
    return x.new_empty((batch, heads, blocks, dim), dtype=torch.float32)


def _new_qkv_means(q: Tensor, k: Tensor, v: Tensor, q_counts: Tensor, kv_counts: Tensor,
                   layout: str) -> tuple[Tensor, Tensor, Tensor]:
    return (_new_means(q, q_counts.numel(), layout), _new_means(k, kv_counts.numel(), layout),
            _new_means(v, kv_counts.numel(), layout))


# ---- block means ---------------------------------------------------------------------------------


@torch.library.custom_op("vsa::block_mean", mutates_args=())
def _block_mean(x: Tensor, valid_counts: Tensor, layout: str) -> Tensor:
    x = kernel_ready(x)
    mean = _new_means(x, valid_counts.numel(), layout)
    launch(_C.block_mean, (x, valid_counts), (mean,), layout)
    return mean


@_block_mean.register_fake
def _block_mean_fake(x, valid_counts, layout):
    return _new_means(x, valid_counts.numel(), layout)


@torch.library.custom_op("vsa::block_mean_backward", mutates_args=())
def _block_mean_backward(dmean: Tensor, valid_counts: Tensor, x_shape: Sequence[int],
                         x_dtype: torch.dtype, layout: str) -> Tensor:
    dx = dmean.new_empty(x_shape, dtype=x_dtype)
    launch(_C.block_mean_backward, (dmean.contiguous(), valid_counts), (dx,), layout)
    return dx


@_block_mean_backward.register_fake
def _block_mean_backward_fake(dmean, valid_counts, x_shape, x_dtype, layout):
    return dmean.new_empty(x_shape, dtype=x_dtype)


def _block_mean_setup(ctx, inputs, output):
    x, valid_counts, layout = inputs
    ctx.save_for_backward(valid_counts)
    ctx.x_shape, ctx.x_dtype, ctx.layout = list(x.shape), x.dtype, layout


def _block_mean_grad(ctx, dmean):
    (valid_counts,) = ctx.saved_tensors
    return _block_mean_backward(dmean, valid_counts, ctx.x_shape, ctx.x_dtype, ctx.layout), None, None


_block_mean.register_autograd(_block_mean_grad, setup_context=_block_mean_setup)


# The core names block_means' parts by their fields ('q.x', 'k.valid_counts'): the caller passed
# q and q_variable_block_sizes, k, v and variable_block_sizes (vsa.block_means, the layer).
_PART_FIELD = re.compile(r"\b([qkv])\.(x|valid_counts)\b")


def _caller_name(field: re.Match) -> str:
    part, name = field.groups()
    if name == "x":
        return part
    return "q_variable_block_sizes" if part == "q" else "variable_block_sizes"


@torch.library.custom_op("vsa::block_means", mutates_args=())
def _block_means(q: Tensor, k: Tensor, v: Tensor, q_variable_block_sizes: Tensor, variable_block_sizes: Tensor,
                 layout: str) -> tuple[Tensor, Tensor, Tensor]:
    """vsa::block_mean of q, k and v in one call (on CUDA one launch), bit for bit."""
    q, k, v = kernel_ready(q), kernel_ready(k), kernel_ready(v)
    counts = (q_variable_block_sizes, variable_block_sizes)
    means = _new_qkv_means(q, k, v, *counts, layout)
    try:
        launch(_C.block_means, (q, k, v, *counts), means, layout)
    except (ValueError, UnsupportedError) as error:
        raise type(error)(_PART_FIELD.sub(_caller_name, str(error))) from None
    return means


@_block_means.register_fake
def _block_means_fake(q, k, v, q_variable_block_sizes, variable_block_sizes, layout):
    return _new_qkv_means(q, k, v, q_variable_block_sizes, variable_block_sizes, layout)


def _block_means_setup(ctx, inputs, output):
    q, k, v, q_counts, kv_counts, layout = inputs
    ctx.save_for_backward(q_counts, kv_counts)
    ctx.shapes = [list(x.shape) for x in (q, k, v)]
    ctx.dtypes, ctx.layout = [x.dtype for x in (q, k, v)], layout


def _block_means_grad(ctx, dq_mean, dk_mean, dv_mean):
    q_counts, kv_counts = ctx.saved_tensors
    grads = [None if d is None else _block_mean_backward(d, counts, shape, dtype, ctx.layout)
             for d, counts, shape, dtype in zip((dq_mean, dk_mean, dv_mean), (q_counts, kv_counts, kv_counts),
                                                ctx.shapes, ctx.dtypes)]
    return (*grads, None, None, None)


_block_means.register_autograd(_block_means_grad, setup_context=_block_means_setup)


# ---- coarse stage ----------------------------------------------------------------------------------


def _contiguous(*means: Tensor) -> tuple[Tensor, ...]:
    """The core reads means (and coarse) as contiguous [B, H, N, D]; a caller's view (a slice, a
    transpose) is copied, as block_sparse_attn copies q, k and v it cannot read in place."""
    return tuple(m.contiguous() for m in means)


def _new_coarse_outputs(q_mean: Tensor, topk: int) -> tuple[Tensor, Tensor, Tensor]:
    batch, heads, blocks, _ = _bhsd(q_mean.shape, "bhsd")
    return (q_mean.new_empty(q_mean.shape, dtype=torch.float32),
            q_mean.new_empty((batch, heads, blocks, topk), dtype=torch.int32),
            q_mean.new_empty((batch, heads, blocks), dtype=torch.int32))


@torch.library.custom_op("vsa::coarse_stage", mutates_args=())
def _coarse_stage(q_mean: Tensor, k_mean: Tensor, v_mean: Tensor, variable_block_sizes: Tensor,
                  topk: int, scale: float) -> tuple[Tensor, Tensor, Tensor]:
    coarse, q2k_idx, q2k_num = _new_coarse_outputs(q_mean, topk)
    launch(_C.coarse_stage, (*_contiguous(q_mean, k_mean, v_mean), variable_block_sizes),
           (coarse, q2k_idx, q2k_num), scale)
    return coarse, q2k_idx, q2k_num


@_coarse_stage.register_fake
def _coarse_stage_fake(q_mean, k_mean, v_mean, variable_block_sizes, topk, scale):
    return _new_coarse_outputs(q_mean, topk)


def _coarse_stage_setup(ctx, inputs, output):
    q_mean, k_mean, v_mean, variable_block_sizes, _topk, scale = inputs
    coarse, q2k_idx, q2k_num = output
    ctx.mark_non_differentiable(q2k_idx, q2k_num)
    ctx.save_for_backward(q_mean, k_mean, v_mean, variable_block_sizes, coarse)
    ctx.scale = scale


def _new_coarse_grads(q_mean: Tensor, k_mean: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    return (q_mean.new_empty(q_mean.shape), k_mean.new_empty(k_mean.shape), k_mean.new_empty(k_mean.shape))


def _coarse_backward_kernel(q_mean, k_mean, v_mean, variable_block_sizes, coarse, dcoarse, dq_mean, dk_mean,
                            dv_mean, scale, stream):
    """_C.coarse_stage_backward with the device scratch it asks for (P and dS on CUDA),
    from torch's caching allocator."""
    arrays = (q_mean, k_mean, v_mean, variable_block_sizes, coarse, dcoarse)
    size = _C.coarse_stage_backward_workspace_bytes(*arrays, dq_mean, dk_mean, dv_mean, scale)
    workspace = dq_mean.new_empty(size, dtype=torch.uint8) if size else None
    _C.coarse_stage_backward(*arrays, workspace, dq_mean, dk_mean, dv_mean, scale, stream)


@torch.library.custom_op("vsa::coarse_stage_backward", mutates_args=())
def _coarse_stage_backward(q_mean: Tensor, k_mean: Tensor, v_mean: Tensor, variable_block_sizes: Tensor,
                           coarse: Tensor, dcoarse: Tensor, scale: float) -> tuple[Tensor, Tensor, Tensor]:
    """The gradients of vsa::coarse_stage's output with respect to its three means, float32
    (vsa::coarse_stage_backward: dense attention's backward on the means; the KV means'
    gradients sum over each KV head's query heads). scale 0 means 1/sqrt(D)."""
    grads = _new_coarse_grads(q_mean, k_mean)
    launch(_coarse_backward_kernel, (*_contiguous(q_mean, k_mean, v_mean), variable_block_sizes, coarse,
                                     dcoarse.contiguous()),
           grads, scale)
    return grads


@_coarse_stage_backward.register_fake
def _coarse_stage_backward_fake(q_mean, k_mean, v_mean, variable_block_sizes, coarse, dcoarse, scale):
    return _new_coarse_grads(q_mean, k_mean)


def _coarse_stage_grad(ctx, dcoarse, _didx, _dnum):
    q_mean, k_mean, v_mean, variable_block_sizes, coarse = ctx.saved_tensors
    return (*_coarse_stage_backward(q_mean, k_mean, v_mean, variable_block_sizes, coarse, dcoarse, ctx.scale),
            None, None, None)


_coarse_stage.register_autograd(_coarse_stage_grad, setup_context=_coarse_stage_setup)


# ---- gate combine ----------------------------------------------------------------------------------


@torch.library.custom_op("vsa::gate_combine", mutates_args=())
def _gate_combine(fine: Tensor, coarse: Tensor, gate: Optional[Tensor], layout: str) -> Tensor:
    fine = kernel_ready(fine)
    gate = None if gate is None else kernel_ready(gate)
    out = fine.new_empty(fine.shape)
    launch(_C.gate_combine, (fine, coarse.contiguous(), gate), (out,), layout)
    return out


@_gate_combine.register_fake
def _gate_combine_fake(fine, coarse, gate, layout):
    return fine.new_empty(fine.shape)


def _new_combine_grads(dout: Tensor, coarse: Tensor, gated: bool) -> tuple[Tensor, Tensor]:
    # Without a gate there is no dgate; an empty tensor stands in (custom ops
    # cannot return None).
    return (coarse.new_empty(coarse.shape, dtype=torch.float32),
            dout.new_empty(dout.shape if gated else (0,)))


@torch.library.custom_op("vsa::gate_combine_backward", mutates_args=())
def _gate_combine_backward(dout: Tensor, coarse: Tensor, gate: Optional[Tensor],
                           layout: str) -> tuple[Tensor, Tensor]:
    dout = kernel_ready(dout)
    gate = None if gate is None else kernel_ready(gate)
    dcoarse, dgate = _new_combine_grads(dout, coarse, gate is not None)
    launch(_C.gate_combine_backward, (dout, coarse.contiguous(), gate), (dcoarse, None if gate is None else dgate),
           layout)
    return dcoarse, dgate


@_gate_combine_backward.register_fake
def _gate_combine_backward_fake(dout, coarse, gate, layout):
    return _new_combine_grads(dout, coarse, gate is not None)


def _gate_combine_setup(ctx, inputs, output):
    _fine, coarse, gate, layout = inputs
    ctx.save_for_backward(coarse, gate)
    ctx.layout = layout


def _gate_combine_grad(ctx, dout):
    coarse, gate = ctx.saved_tensors
    dcoarse, dgate = _gate_combine_backward(dout, coarse, gate, ctx.layout)
    return dout, dcoarse, (None if gate is None else dgate), None


_gate_combine.register_autograd(_gate_combine_grad, setup_context=_gate_combine_setup)


# ---- fine stage with the gate combine fused in ----------------------------------------------------


def _run_fine_stage_gated(q, k, v, q2k_idx, q2k_num, variable_block_sizes, q_variable_block_sizes, coarse, gate,
                          scale, layout, out, fine=None, lse=None):
    """_C.fine_stage_gated into out (and fine and lse, where given)."""
    q, k, v = kernel_ready(q), kernel_ready(k), kernel_ready(v)
    gate = None if gate is None else kernel_ready(gate)
    launch(_C.fine_stage_gated,
           (q, k, v, q2k_idx, q2k_num, variable_block_sizes, q_variable_block_sizes, coarse.contiguous(), gate),
           (out, fine, lse), layout, scale)


@torch.library.custom_op("vsa::fine_stage_gated", mutates_args=())
def _fine_stage_gated(q: Tensor, k: Tensor, v: Tensor, q2k_idx: Tensor, q2k_num: Tensor,
                      variable_block_sizes: Tensor, q_variable_block_sizes: Optional[Tensor],
                      coarse: Tensor, gate: Optional[Tensor], scale: float, layout: str) -> Tensor:
    out = q.new_empty(q.shape)
    _run_fine_stage_gated(q, k, v, q2k_idx, q2k_num, variable_block_sizes, q_variable_block_sizes, coarse, gate,
                          scale, layout, out)
    return out


@_fine_stage_gated.register_fake
def _fine_stage_gated_fake(q, k, v, q2k_idx, q2k_num, variable_block_sizes, q_variable_block_sizes, coarse,
                           gate, scale, layout):
    return q.new_empty(q.shape)


@torch.library.custom_op("vsa::fine_stage_gated_training", mutates_args=())
def _fine_stage_gated_training(q: Tensor, k: Tensor, v: Tensor, q2k_idx: Tensor, q2k_num: Tensor,
                               variable_block_sizes: Tensor, q_variable_block_sizes: Optional[Tensor],
                               coarse: Tensor, gate: Optional[Tensor], scale: float,
                               layout: str) -> tuple[Tensor, Tensor, Tensor]:
    """(out, fine, lse): the gated output and, bitwise as vsa::forward gives them, the attention
    alone and its lse, which the fine stage's backward reads."""
    out, fine, lse = q.new_empty(q.shape), q.new_empty(q.shape), _new_lse(q, layout, True)
    _run_fine_stage_gated(q, k, v, q2k_idx, q2k_num, variable_block_sizes, q_variable_block_sizes, coarse, gate,
                          scale, layout, out, fine, lse)
    return out, fine, lse


@_fine_stage_gated_training.register_fake
def _fine_stage_gated_training_fake(q, k, v, q2k_idx, q2k_num, variable_block_sizes, q_variable_block_sizes,
                                    coarse, gate, scale, layout):
    return q.new_empty(q.shape), q.new_empty(q.shape), _new_lse(q, layout, True)
