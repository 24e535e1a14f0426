"""The VSA layer's training path as one autograd node.

Built from the stage ops, its backward runs in the one order that lets the
block means' gradients ride along: the gate combine's backward (dcoarse,
dgate), the coarse stage's (the means' gradients), then the fine stage's,
which adds each block's mean gradient / count to its valid rows of dq, dk and
dv as it writes them (vsa::BackwardParams::dq_mean). Stage by stage, autograd
would run the means' backward as three passes writing q-, k- and v-sized
tensors and then add each to the fine stage's gradient: two more reads and a
write of each (docs/layer.md).
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from vsa.attention import _backward
from vsa.layer_ops import (_block_means, _coarse_stage, _coarse_stage_backward, _fine_stage_gated_training,
                           _gate_combine_backward)


class _TrainingLayer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, gate: Optional[Tensor], variable_block_sizes: Tensor,
                q_variable_block_sizes: Tensor, topk: int, scale: float, layout: str, deterministic: bool):
        vbs, q_vbs = variable_block_sizes, q_variable_block_sizes
        means = _block_means(q, k, v, q_vbs, vbs, layout)
        coarse, q2k_idx, q2k_num = _coarse_stage(*means, vbs, topk, scale)
        # One pass writes the gated output and the attention alone, which the backward's delta reads.
        out, fine, lse = _fine_stage_gated_training(q, k, v, q2k_idx, q2k_num, vbs, q_vbs, coarse, gate, scale,
                                                    layout)
        ctx.mark_non_differentiable(q2k_idx, q2k_num)
        # No zero tensors filled for the lists' gradients before every backward (two launches and
        # allocations): they, and an absent gradient of out, arrive as None.
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(q, k, v, *means, coarse, fine, lse, q2k_idx, q2k_num, vbs, q_vbs,
                              *(() if gate is None else (gate,)))
        ctx.scale, ctx.layout, ctx.deterministic = scale, layout, deterministic
        return out, q2k_idx, q2k_num

    @staticmethod
    def backward(ctx, dout: Optional[Tensor], _didx, _dnum):
        if dout is None:  # no gradient reached out (gradcheck's undefined-gradient check)
            return (None,) * 10
        (q, k, v, q_mean, k_mean, v_mean, coarse, fine, lse, q2k_idx, q2k_num, vbs, q_vbs,
         *gate) = ctx.saved_tensors
        gate = gate[0] if gate else None
        dcoarse, dgate = _gate_combine_backward(dout, coarse, gate, ctx.layout)
        mean_grads = _coarse_stage_backward(q_mean, k_mean, v_mean, vbs, coarse, dcoarse, ctx.scale)
        # out = fine + coarse · gate: the fine stage's gradient is dout itself.
        dq, dk, dv = _backward(dout, q, k, v, fine, lse, q2k_idx, q2k_num, vbs, q_vbs, ctx.scale, ctx.layout,
                               ctx.deterministic, *mean_grads)
        return dq, dk, dv, (None if gate is None else dgate), None, None, None, None, None, None


def _distinct(*tensors: Optional[Tensor]) -> list[Optional[Tensor]]:
    """The tensors, each one given again after its first place replaced there by a view of itself.

    Dynamo cannot trace an autograd.Function that receives one tensor twice, which a layer call
    does as a matter of course (q_variable_block_sizes is variable_block_sizes in self-attention,
    k is v); a view holds the same values and passes its gradient to the same leaf.
    """
    given: list[Tensor] = []
    out: list[Optional[Tensor]] = []
    for t in tensors:
        if t is not None:
            if any(t is g for g in given):
                t = t.view_as(t)
            else:
                given.append(t)
        out.append(t)
    return out


def training_layer(q: Tensor, k: Tensor, v: Tensor, gate: Optional[Tensor], variable_block_sizes: Tensor,
                   q_variable_block_sizes: Tensor, topk: int, scale: float, layout: str,
                   deterministic: bool) -> tuple[Tensor, Tensor, Tensor]:
    """(out, q2k_idx, q2k_num) of the layer, differentiable in q, k, v and gate."""
    tensors = _distinct(q, k, v, gate, variable_block_sizes, q_variable_block_sizes)
    return _TrainingLayer.apply(*tensors, topk, scale, layout, deterministic)
