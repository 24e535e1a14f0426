"""Every backend the benchmark compares, one function each.

A peer takes a Problem and returns forward(q, k, v) -> out (BHSD), or raises Unavailable with the
reason it cannot run here. Any other error on its first call is caught by the caller and reported
the same way, so a broken or missing peer never stops the run.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import vsa

Forward = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class Unavailable(Exception):
    """The peer cannot run this problem on this machine; the message says why."""


@dataclass
class Problem:
    example: tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # one input set, for static checks
    block_size: int
    # The block selection; dense peers get none.
    q2k_idx: torch.Tensor | None = None
    q2k_num: torch.Tensor | None = None
    variable_block_sizes: torch.Tensor | None = None

    @property
    def device(self) -> torch.device:
        return self.example[0].device


def ours(p: Problem) -> Forward:
    q, k, v = p.example
    support = vsa.is_supported(q, k, v, p.variable_block_sizes, p.q2k_idx, p.q2k_num,
                               layout="bhsd")
    if not support:
        raise Unavailable(f"not supported: {support.reason}")
    # need_lse=False: the inference path, like FlexAttention without return_lse; the op still
    # computes lse when a backward will need it.
    return lambda q, k, v: vsa.block_sparse_attn(q, k, v, p.q2k_idx, p.q2k_num,
                                                 p.variable_block_sizes, need_lse=False)[0]


def ours_portable(p: Problem) -> Forward:
    """vsa's portable mma.sync kernel on a Hopper GPU, where 'vsa' runs the sm_90 kernel: the
    VSA_CUDA_KERNEL override is set around each call."""
    if p.device.type != "cuda" or torch.cuda.get_device_capability(p.device) != (9, 0):
        raise Unavailable("only distinct from 'vsa' on sm_90 GPUs")
    run = ours(p)

    def forward(q, k, v):
        previous = os.environ.get("VSA_CUDA_KERNEL")
        os.environ["VSA_CUDA_KERNEL"] = "sm80"
        try:
            return run(q, k, v)
        finally:
            if previous is None:
                del os.environ["VSA_CUDA_KERNEL"]
            else:
                os.environ["VSA_CUDA_KERNEL"] = previous

    return forward


def _fastvideo(p: Problem):
    if p.device.type != "cuda":
        raise Unavailable("CUDA only")
    if p.block_size != 64:
        raise Unavailable("64-token blocks only")
    try:
        from fastvideo_kernel import block_sparse_attn as ops
    except ImportError as e:
        raise Unavailable(f"fastvideo_kernel not importable: {e}") from None
    as_int32 = [t.to(torch.int32).contiguous()
                for t in (p.q2k_idx, p.q2k_num, p.variable_block_sizes)]
    return ops, as_int32


def fastvideo_tk(p: Problem) -> Forward:
    """FastVideo's ThunderKittens sm_90 kernel."""
    ops, meta = _fastvideo(p)
    if torch.cuda.get_device_capability(p.device) != (9, 0):
        raise Unavailable("ThunderKittens kernel is built for sm_90 only")
    return lambda q, k, v: ops.block_sparse_attn_sm90(q, k, v, *meta)[0]


def fastvideo_triton(p: Problem) -> Forward:
    ops, meta = _fastvideo(p)
    return lambda q, k, v: ops.block_sparse_attn_triton(q, k, v, *meta)[0]


@functools.cache
def _compiled_flex():
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False)


def _ordered(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Block lists of a [.., NQ, NK] bool map: counts, and column ids with the set ones first."""
    as_int = mask.to(torch.int32)
    order = torch.argsort(as_int, dim=-1, descending=True, stable=True)
    return as_int.sum(-1, dtype=torch.int32), order.to(torch.int32)


def flex_block_mask(p: Problem):
    """The exact FlexAttention BlockMask of the selection, built from the block lists directly.

    Whole blocks go in the 'full' lists, which the compiled kernel runs without mask_mod; only
    partial blocks pay for the per-element mask. mask_mod still states the whole selection,
    because FlexAttention's semantics (and its eager path) are mask_mod's, the block lists
    being only the skipping plan."""
    from torch.nn.attention.flex_attention import BlockMask

    idx, num, vbs, blk = p.q2k_idx, p.q2k_num, p.variable_block_sizes, p.block_size
    nk = vbs.numel()
    listed = torch.arange(idx.shape[-1], device=idx.device) < num[..., None]
    # Unlisted entries scatter into a spare last column that is then dropped.
    cols = torch.where(listed, idx.long(), nk)
    selected = torch.zeros((*idx.shape[:-1], nk + 1), dtype=torch.bool, device=idx.device)
    selected = selected.scatter_(-1, cols, True)[..., :nk]
    whole = vbs == blk
    partial_num, partial_idx = _ordered(selected & ~whole)
    full_num, full_idx = _ordered(selected & whole)
    valid = vbs.long()

    def selected_valid_key(b, h, q_idx, kv_idx):
        block = kv_idx // blk
        return selected[b, h, q_idx // blk, block] & ((kv_idx % blk) < valid[block])

    return BlockMask.from_kv_blocks(partial_num, partial_idx, full_num, full_idx,
                                    BLOCK_SIZE=blk, mask_mod=selected_valid_key)


def _flex_tiles(block_size: int) -> dict:
    """Forward tiles that divide a 64-token sparse block: flex's default forward tile is 128 rows.
    torch 2.15 shrinks its tiles itself; 2.11 raises in the forward without this and has no
    option to fix its backward (it checks its built-in backward tiles before reading these)."""
    return {"BLOCK_M": block_size, "BLOCK_N": block_size} if block_size < 128 else {}


def flex(p: Problem) -> Forward:
    if p.device.type != "cuda":
        raise Unavailable("compiled FlexAttention is benchmarked on GPU only")
    mask = flex_block_mask(p)
    attention = _compiled_flex()
    tiles = _flex_tiles(p.block_size)
    return lambda q, k, v: attention(q, k, v, block_mask=mask, kernel_options=tiles)


def _dense(backend: SDPBackend | None) -> Callable[[Problem], Forward]:
    """Dense SDPA over the real tokens (the caller passes unpadded q/k/v), pinned to one backend."""

    def peer(p: Problem) -> Forward:
        if backend is None:
            return F.scaled_dot_product_attention
        if p.device.type != "cuda":
            raise Unavailable("CUDA only")

        def forward(q, k, v):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v)

        return forward

    return peer


SPARSE_PEERS: dict[str, Callable[[Problem], Forward]] = {
    "vsa": ours,
    "vsa-portable": ours_portable,
    "fastvideo-tk": fastvideo_tk,
    "fastvideo-triton": fastvideo_triton,
    "flex": flex,
}
DENSE_PEERS = {
    "cuda": {"dense-cudnn": _dense(SDPBackend.CUDNN_ATTENTION),
             "dense-flash": _dense(SDPBackend.FLASH_ATTENTION)},
    "cpu": {"dense-sdpa": _dense(None)},
}
# Speed-ups are quoted against this dense backend when it ran, else against the fastest dense.
DENSE_BASELINE = "dense-cudnn"
