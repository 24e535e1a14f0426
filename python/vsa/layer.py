"""The VSA layer: coarse stage + fine stage + gate, differentiable end to end.

    out = coarse · gate + fine          (coarse + fine without a gate)

Four stages, each a function a benchmark can time on its own:

- block_means: q, k and v compressed to float32 means over each block's valid
  tokens (pad tokens are masked, never assumed zero).
- coarse_stage: dense attention over the means (its output is broadcast over
  each query block's tokens) and, from the same scores, each query block's
  top-k KV blocks as the sorted lists block_sparse_attn takes.
- fine_stage: each query block attends, token by token, to its top-k blocks
  (block_sparse_attn); the query blocks' pad tokens (q_variable_block_sizes)
  are left out, so their rows of the layer's output are coarse · gate alone.
- gate_combine: fine + coarse · gate, one pass over the sequence.

When no gradient is needed (grad mode off, or none of q, k, v, gate requires
one) video_sparse_attn runs the last two as one: the fine kernel applies the
gate combine in its epilogue (fine_stage_gated), with the same bits and one
pass over the output fewer. Training keeps the fine stage and the combine
apart (the fine stage's backward reads the attention's own output and lse,
which the fused kernel never writes) and records the layer as one autograd
node (vsa.layer_training), whose backward hands the block means' gradients
to the fine backward, which adds them as it writes dq, dk and dv
(docs/layer.md).

Selection (docs/layer.md): scores are exact integer dot products of the
float32 means in block floating point, rounded once to float32, identical on
every backend, so the same inputs select the same blocks on CPU and GPU; ties
go to the lower block id; KV blocks without valid tokens are never selected
and get no coarse weight.
"""

from __future__ import annotations

import math
from typing import Optional, Union

import torch
from torch import Tensor

from vsa._args import LAYOUTS, count_value, invalid_argument, scale_argument, topk_argument
from vsa._tensors import expect_same_device, index_tensor, optional_index_tensor, optional_tensors
from vsa.attention import block_sparse_attn
from vsa.layer_ops import _block_means, _coarse_stage, _fine_stage_gated, _gate_combine
from vsa.layer_training import training_layer


def block_means(q: Tensor, k: Tensor, v: Tensor, q_variable_block_sizes: Tensor,
                variable_block_sizes: Tensor, *, layout: str = "bhsd") -> tuple[Tensor, Tensor, Tensor]:
    """float32 means [B, H, N, D] of q (over q_variable_block_sizes) and of k, v (over
    variable_block_sizes), whatever the layout; differentiable."""
    expect_same_device("q", q, k=k, v=v, q_variable_block_sizes=q_variable_block_sizes,
                       variable_block_sizes=variable_block_sizes)
    return _block_means(q, k, v, index_tensor(q_variable_block_sizes, "q_variable_block_sizes"),
                        index_tensor(variable_block_sizes, "variable_block_sizes"), layout)


def coarse_stage(q_mean: Tensor, k_mean: Tensor, v_mean: Tensor, variable_block_sizes: Tensor,
                 topk: int, *, scale: Optional[float] = None) -> tuple[Tensor, Tensor, Tensor]:
    """(coarse [B, H, NQ, D] float32, q2k_idx [B, H, NQ, topk], q2k_num [B, H, NQ]) int32.

    coarse is differentiable in the three means; the lists are not. A row lists
    min(topk, live blocks) blocks, ascending, then -1.
    """
    expect_same_device("q_mean", q_mean, k_mean=k_mean, v_mean=v_mean, variable_block_sizes=variable_block_sizes)
    vbs = index_tensor(variable_block_sizes, "variable_block_sizes")
    return _coarse_stage(q_mean, k_mean, v_mean, vbs, topk_argument(topk, vbs.numel()), scale_argument(scale))


def fine_stage(q: Tensor, k: Tensor, v: Tensor, q2k_idx: Tensor, q2k_num: Tensor,
               variable_block_sizes: Tensor, *, scale: Optional[float] = None,
               layout: str = "bhsd", q_variable_block_sizes: Optional[Tensor] = None) -> Tensor:
    """Block-sparse attention over the selected blocks (q's shape, layout and dtype); the
    query rows past q_variable_block_sizes (when given) are zero (the CPU backend does not
    compute them; the CUDA kernels compute them and write zeros)."""
    out, _ = block_sparse_attn(q, k, v, q2k_idx, q2k_num, variable_block_sizes, scale=scale,
                               need_lse=False, layout=layout, q_variable_block_sizes=q_variable_block_sizes)
    return out


def gate_combine(fine: Tensor, coarse: Tensor, gate: Optional[Tensor] = None, *,
                 layout: str = "bhsd") -> Tensor:
    """fine + coarse (broadcast over each block's tokens) · gate, rounded once to fine's dtype.

    fine_stage_gated does the same in the fine kernel's epilogue, bitwise alike.
    """
    expect_same_device("fine", fine, coarse=coarse, **optional_tensors(gate=gate))
    return _gate_combine(fine, coarse, gate, layout)


def fine_stage_gated(q: Tensor, k: Tensor, v: Tensor, q2k_idx: Tensor, q2k_num: Tensor,
                     variable_block_sizes: Tensor, coarse: Tensor, gate: Optional[Tensor] = None, *,
                     scale: Optional[float] = None, layout: str = "bhsd",
                     q_variable_block_sizes: Optional[Tensor] = None) -> Tensor:
    """gate_combine(fine_stage(...), coarse, gate) in one kernel, bitwise the same; not
    differentiable (the layer uses it only when no gradient is needed)."""
    expect_same_device("q", q, k=k, v=v, q2k_idx=q2k_idx, q2k_num=q2k_num,
                       variable_block_sizes=variable_block_sizes, coarse=coarse,
                       **optional_tensors(gate=gate, q_variable_block_sizes=q_variable_block_sizes))
    return _fine_stage_gated(q, k, v, index_tensor(q2k_idx, "q2k_idx"), index_tensor(q2k_num, "q2k_num"),
                             index_tensor(variable_block_sizes, "variable_block_sizes"),
                             optional_index_tensor(q_variable_block_sizes, "q_variable_block_sizes"),
                             coarse, gate, scale_argument(scale), layout)


def _block_tokens(block_size: Union[int, tuple[int, int, int]]) -> int:
    """The tokens per block: block_size, or the volume of a (t, h, w) tile; counts, as topk is
    read (int() took 64.5 and '64' as 64, and a wrong size was named as variable_block_sizes)."""
    tile = isinstance(block_size, (tuple, list))
    extents = [count_value(n) for n in block_size] if tile else [count_value(block_size)]
    if ((tile and len(extents) != 3) or any(n is None or n < 1 for n in extents)
            or math.prod(extents) not in (64, 128)):
        raise invalid_argument("block_size", "64 or 128 tokens, or a (t, h, w) tile of that volume",
                               repr(block_size))
    return math.prod(extents)


def _check_blocks(t: Tensor, name: str, counts: Tensor, counts_name: str, block: int,
                  layout: str) -> None:
    """t's sequence is len(counts) whole blocks of `block` tokens (a t of another rank is
    the core's to refuse, by its shape: it has no sequence axis to read here)."""
    if t.dim() != 4 or counts.dim() != 1:
        return
    seq = t.shape[2] if layout == "bhsd" else t.shape[1]
    if counts.numel() * block != seq:
        raise invalid_argument(f"{counts_name}.shape",
                               f"one entry per {block}-token block of {name} ({seq} tokens)",
                               list(counts.shape))


def check_keys(q: Tensor, k: Tensor, v: Tensor, layout: str) -> None:
    """k of q's batch and head dim with heads dividing q's, v of k's shape: checked here because
    the coarse stage would name these through the block means (k_mean, v_mean), which the caller
    never passed. Tensors of another rank, or a q of a head dim no kernel runs, are the core's to
    refuse, by their own names (k's head dim checked against q's would blame a k that is fine)."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4 or q.shape[3] not in (64, 128):
        return
    head = 1 if layout == "bhsd" else 2
    heads, kv_heads = q.shape[head], k.shape[head]
    if k.shape[0] != q.shape[0] or k.shape[3] != q.shape[3] or kv_heads < 1 or heads % kv_heads:
        raise invalid_argument("k.shape", f"q's batch {q.shape[0]} and head dim {q.shape[3]}, and heads "
                               f"dividing q's {heads} (GQA)", list(k.shape))
    if v.shape != k.shape:
        raise invalid_argument("v.shape", f"{list(k.shape)} (as k)", list(v.shape))


def _needs_grad(*tensors: Optional[Tensor]) -> bool:
    """Whether autograd will record the layer (traced, not a host sync, under torch.compile)."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def video_sparse_attn(q: Tensor, k: Tensor, v: Tensor, variable_block_sizes: Tensor,
                      q_variable_block_sizes: Tensor, topk: int,
                      block_size: Union[int, tuple[int, int, int]] = 64,
                      gate: Optional[Tensor] = None, *, scale: Optional[float] = None,
                      layout: str = "bhsd", return_lists: bool = False):
    """VSA attention on tiled, padded sequences (see vsa.tile).

    q [B, H, Sq, D], k/v [B, Hkv, Skv, D] ("bhsd"; or [B, S, H, D] with
    layout="bshd"), H % Hkv == 0; bf16/fp16 (CPU and CUDA) or fp32 (CPU).
    variable_block_sizes [NK] and q_variable_block_sizes [NQ] count the valid
    tokens of each block; block_size is the tokens per block, 64 or 128 (an
    int, or a tile shape whose volume it is). gate (q's shape and dtype)
    weights the coarse output. scale (default 1/sqrt(D)) serves both the
    coarse and the fine attention.

    Returns out (q's shape and layout), or (out, q2k_idx, q2k_num) with
    return_lists=True: the blocks each query block attended, for reuse or
    inspection. KV blocks without valid tokens get no coarse weight and are
    never selected (a row lists min(topk, live blocks) of them); top-k ties go
    to the lower block id. Same inputs, same lists on every backend.
    """
    block = _block_tokens(block_size)
    if layout not in LAYOUTS:
        raise invalid_argument("layout", "'bhsd' or 'bshd'", repr(layout))
    expect_same_device("q", q, k=k, v=v, variable_block_sizes=variable_block_sizes,
                       q_variable_block_sizes=q_variable_block_sizes, **optional_tensors(gate=gate))
    check_keys(q, k, v, layout)
    vbs = index_tensor(variable_block_sizes, "variable_block_sizes")
    q_vbs = index_tensor(q_variable_block_sizes, "q_variable_block_sizes")
    _check_blocks(k, "k", vbs, "variable_block_sizes", block, layout)
    _check_blocks(q, "q", q_vbs, "q_variable_block_sizes", block, layout)
    topk = topk_argument(topk, vbs.numel())

    # The fine stage computes real query rows only: a pad token's output is coarse · gate.
    if _needs_grad(q, k, v, gate):  # one autograd node: the means' gradients ride the fine backward
        out, q2k_idx, q2k_num = training_layer(q, k, v, gate, vbs, q_vbs, topk, scale_argument(scale),
                                               layout, torch.are_deterministic_algorithms_enabled())
    else:  # the same bits, one pass over the output fewer
        # The stage ops themselves: the block sizes and topk were normalized and checked above.
        q_mean, k_mean, v_mean = _block_means(q, k, v, q_vbs, vbs, layout)
        coarse, q2k_idx, q2k_num = _coarse_stage(q_mean, k_mean, v_mean, vbs, topk, scale_argument(scale))
        out = fine_stage_gated(q, k, v, q2k_idx, q2k_num, vbs, coarse, gate, scale=scale, layout=layout,
                               q_variable_block_sizes=q_vbs)
    return (out, q2k_idx, q2k_num) if return_lists else out
