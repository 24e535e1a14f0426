"""Every backend `vsa bench --op layer` compares, one function each: a LayerProblem in, a Runner
(forward(q, k, v) -> out, BHSD) out, or Unavailable with the reason (see peers.py)."""

from __future__ import annotations

import contextlib
import warnings
from typing import Callable

import torch

import vsa

from . import fastvideo
from .flex import allow_backward_on_small_blocks, block_mask, compiled_flex, kernel_options
from .layer_reference import coarse_stage
from .problem import LayerProblem, Runner


def ours(p: LayerProblem) -> Runner:
    vbs = p.variable_block_sizes
    return Runner(lambda q, k, v: vsa.video_sparse_attn(q, k, v, vbs, vbs, p.topk,
                                                        block_size=p.block_size))


def ours_fine(p: LayerProblem) -> Runner:
    """vsa's fine kernel alone on the reference selection: the yardstick of the layer's overhead
    (need_lse=False like the layer's inference path; the real query rows given, as the layer
    gives its fine stage)."""
    vbs = p.variable_block_sizes
    return Runner(lambda q, k, v: vsa.block_sparse_attn(q, k, v, p.q2k_idx, p.q2k_num, vbs,
                                                        need_lse=False, q_variable_block_sizes=vbs)[0])


@contextlib.contextmanager
def _quiet_eager_flex():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        yield


def torch_flex(p: LayerProblem) -> Runner:
    """The layer as a user writes it in plain torch: torch coarse stage and top-k, the fine stage
    through FlexAttention with a BlockMask built from the top-k on every call (compiled on GPU;
    eager on the CPU, where it computes dense scores)."""
    vbs, blk, topk = p.variable_block_sizes, p.block_size, p.topk
    selectable = vbs > 0
    if p.device.type == "cuda":
        allow_backward_on_small_blocks()
        attention, tiles, scope = compiled_flex(), kernel_options(blk), contextlib.nullcontext
    else:
        from torch.nn.attention.flex_attention import flex_attention

        attention, tiles, scope = flex_attention, None, _quiet_eager_flex

    def forward(q, k, v):
        coarse, top = coarse_stage(q, k, v, vbs, blk, topk)
        selected = torch.zeros((*top.shape[:-1], vbs.numel()), dtype=torch.bool, device=q.device)
        selected = selected.scatter_(-1, top, True) & selectable
        fine = attention(q, k, v, block_mask=block_mask(selected, vbs, blk), kernel_options=tiles)
        return fine + coarse.repeat_interleave(blk, dim=2)

    return Runner(forward, scope)


LAYER_PEERS: dict[str, Callable[[LayerProblem], Runner]] = {
    "vsa": ours,
    "vsa-fine": ours_fine,
    "fastvideo-tk": fastvideo.tk_layer,
    "fastvideo-triton": fastvideo.triton_layer,
    "torch-flex": torch_flex,
}
# The row the other rows' forward is divided by ("x fine").
FINE_KERNEL = "vsa-fine"
