"""Every backend `vsa bench --op attention` compares, one function each.

A peer takes a Problem and returns a Runner (forward(q, k, v) -> out in BHSD, and the scope its
forward and backward calls run in), or raises Unavailable with the reason it cannot run here. Any
other error on its first call is caught by the caller and reported the same way, so a broken or
missing peer never stops the run. Backward is timed through autograd wherever a peer has one.
"""

from __future__ import annotations

import functools
from typing import Callable

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import vsa

from . import fastvideo
from .flex import allow_backward_on_small_blocks, block_mask, compiled_flex, kernel_options, \
    selection_map
from .problem import Problem, Runner, Unavailable, environment_variable


def _vsa_runner(p: Problem, q_variable_block_sizes: torch.Tensor | None) -> Runner:
    q, k, v = p.example
    support = vsa.is_supported(q, k, v, p.variable_block_sizes, p.q2k_idx, p.q2k_num,
                               layout="bhsd")
    if not support:
        raise Unavailable(f"not supported: {support.reason}")
    # need_lse=False: the inference path, like FlexAttention without return_lse; the op still
    # computes lse when a backward will need it.
    return Runner(lambda q, k, v: vsa.block_sparse_attn(
        q, k, v, p.q2k_idx, p.q2k_num, p.variable_block_sizes, need_lse=False,
        q_variable_block_sizes=q_variable_block_sizes)[0])


def vsa_query_rows(p: Problem) -> torch.Tensor | None:
    """The real query rows 'vsa' is told: on the CPU those of a partial-block case, as the layer
    passes them, so it computes no padding row (like dense attention over the real tokens); on
    the GPU none, so every row is computed as FastVideo's kernels do ('vsa-rows' is told them)."""
    return p.real_query_rows if p.device.type == "cpu" else None


def ours(p: Problem) -> Runner:
    return _vsa_runner(p, vsa_query_rows(p))


def ours_real_rows(p: Problem) -> Runner:
    """vsa told the real query rows of a partial block, as the VSA layer calls it: the padding
    rows get no output and no gradient work (the dQ reductions skip them). Only on the GPU: on
    the CPU 'vsa' is already given the rows (vsa_query_rows)."""
    if p.device.type != "cuda":
        raise Unavailable("the same call as 'vsa' on the CPU")
    if p.real_query_rows is None:
        raise Unavailable("no partial blocks: every query row is real")
    return _vsa_runner(p, p.real_query_rows)


def ours_portable(p: Problem) -> Runner:
    """vsa's portable mma.sync kernels on a Hopper GPU, where 'vsa' runs the sm_90 ones: the
    VSA_CUDA_KERNEL override is set around each forward and each backward call."""
    if p.device.type != "cuda" or torch.cuda.get_device_capability(p.device) != (9, 0):
        raise Unavailable("only distinct from 'vsa' on sm_90 GPUs")
    return Runner(ours(p).forward,
                  functools.partial(environment_variable, "VSA_CUDA_KERNEL", "sm80"))


def flex_block_mask(p: Problem):
    """The exact FlexAttention BlockMask of the problem's block lists."""
    selected = selection_map(p.q2k_idx, p.q2k_num, p.variable_block_sizes.numel())
    return block_mask(selected, p.variable_block_sizes, p.block_size)


def flex(p: Problem) -> Runner:
    if p.device.type != "cuda":
        raise Unavailable("compiled FlexAttention is benchmarked on GPU only")
    allow_backward_on_small_blocks()
    mask = flex_block_mask(p)
    attention = compiled_flex()
    tiles = kernel_options(p.block_size)
    return Runner(lambda q, k, v: attention(q, k, v, block_mask=mask, kernel_options=tiles))


def _dense(backend: SDPBackend | None) -> Callable[[Problem], Runner]:
    """Dense SDPA over the real tokens (the caller passes unpadded q/k/v), pinned to one backend."""

    def peer(p: Problem) -> Runner:
        if backend is None:
            return Runner(F.scaled_dot_product_attention)
        if p.device.type != "cuda":
            raise Unavailable("CUDA only")
        return Runner(F.scaled_dot_product_attention,
                      functools.partial(sdpa_kernel, backend))

    return peer


SPARSE_PEERS: dict[str, Callable[[Problem], Runner]] = {
    "vsa": ours,
    "vsa-portable": ours_portable,
    "vsa-rows": ours_real_rows,
    "fastvideo-tk": fastvideo.tk_attention,
    "fastvideo-triton": fastvideo.triton_attention,
    "flex": flex,
}
DENSE_PEERS = {
    "cuda": {"dense-cudnn": _dense(SDPBackend.CUDNN_ATTENTION),
             "dense-flash": _dense(SDPBackend.FLASH_ATTENTION)},
    "cpu": {"dense-sdpa": _dense(None)},
}
# Speed-ups are quoted against this dense backend when it ran, else against the fastest dense.
DENSE_BASELINE = "dense-cudnn"
# vsa's ratios are quoted against the fastest of these in the same run.
FASTVIDEO_PEERS = ("fastvideo-tk", "fastvideo-triton")
