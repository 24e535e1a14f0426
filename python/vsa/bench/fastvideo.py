"""Adapters for FastVideo's `fastvideo_kernel` (assembled by the peer kit, shared/peers/), read from
its source; the benchmark never imports it anywhere else.

What the package exposes, and how it is called here:
- `fastvideo_kernel.block_sparse_attn` (a module, shadowed on the package by the function of the
  same name, hence import_module) holds two custom ops with autograd, each taking
  (q, k, v, q2k_idx, q2k_num, variable_block_sizes) with int32 contiguous lists, BHSD bf16,
  64-token blocks, equal q and kv heads. 128-token blocks run as two 64-token halves each
  (lists_as_64_token_blocks): FastVideo's own `block_sparse_attn_128` runs them that way,
  through its Triton kernel, on any GPU by default (its native 128-token CuTe kernel is opt-in
  and for Blackwell); the ThunderKittens kernel on the halves is this benchmark's construction:
  - `block_sparse_attn_sm90`: the ThunderKittens kernel (needs `fastvideo_kernel._C`, built on
    first import; sm_90 and batch 1 only). Returns (out, L) with L [B, H, S, 1] = -lse_e / scale.
    Its backward inverts the lists (Triton) and runs the TK backward.
  - `block_sparse_attn_triton`: the Triton kernels. Returns (out, M) with M [B, H, S] base-2 lse,
    vsa's own lse convention. Its backward inverts the lists and runs the Triton backward.
- `fastvideo_kernel.ops.video_sparse_attn(q, k, v, vbs, q_vbs, topk, block_size, gate)`: the VSA
  layer. block_size is a tile: an int n means n x n x n tokens (4 -> 64), never a token count.
  Its fine stage runs TK on sm_90 when `_C` loads, else Triton; FASTVIDEO_VSA_TRITON=1 forces
  Triton (read at every call). Its block means sum the whole block (pad tokens included) and
  divide by the valid count, so pad tokens must be zero.
"""

from __future__ import annotations

import functools
import importlib
import math
from typing import Callable

import torch

from ..metadata import halve_block_sizes
from .problem import LayerProblem, Problem, Runner, Unavailable, environment_variable

TILE_SIDE = 4  # FastVideo's layer: block_size=4 is a 4x4x4 tile of 64 tokens


ATTENTION_BLOCKS = (64, 128)  # 128 as two 64-token halves
LAYER_BLOCKS = (64,)  # the layer takes a cubic tile side; 128 tokens (4x4x8) is not a cube


def unsupported(q: torch.Tensor, k: torch.Tensor, block_size: int,
                block_sizes: tuple[int, ...] = ATTENTION_BLOCKS) -> str | None:
    """Why FastVideo's kernels cannot run these inputs, or None (static facts only)."""
    if q.device.type != "cuda":
        return "CUDA only"
    if block_size not in block_sizes:
        return "- or ".join(f"{b}" for b in block_sizes) + "-token blocks only"
    if q.dtype != torch.bfloat16:
        return "bf16 only"
    if q.shape[1] != k.shape[1]:
        return "equal query and key/value heads only (no GQA)"
    return None


def tk_unsupported(q: torch.Tensor, k: torch.Tensor, block_size: int,
                   block_sizes: tuple[int, ...] = ATTENTION_BLOCKS) -> str | None:
    reason = unsupported(q, k, block_size, block_sizes)
    if reason is None and torch.cuda.get_device_capability(q.device) != (9, 0):
        reason = "the ThunderKittens kernel is built for sm_90 only"
    if reason is None and q.shape[0] != 1:
        reason = "the ThunderKittens kernel runs batch 1 only"
    return reason


def _import(name: str):
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise Unavailable(f"{name} not importable ({e}); see shared/peers/README.md") from None
    except Exception as e:  # the TK extension compiles on first import and may fail there
        raise Unavailable(f"importing {name} failed: {type(e).__name__}: "
                          f"{str(e).strip()[:200]}") from None


def _check(q: torch.Tensor, k: torch.Tensor, block_size: int, tk: bool,
           block_sizes: tuple[int, ...]) -> None:
    """Raises Unavailable unless the kernel can run these inputs here."""
    reason = (tk_unsupported if tk else unsupported)(q, k, block_size, block_sizes)
    if reason:
        raise Unavailable(reason)


def _load(name: str, tk: bool):
    """Imports a FastVideo module; for TK also the compiled extension: without it FastVideo's op
    fails with a generic ImportError at call time, and its layer quietly runs Triton instead."""
    module = _import(name)
    if tk:
        _import("fastvideo_kernel._C")
    return module


def int32_lists(q2k_idx: torch.Tensor, q2k_num: torch.Tensor,
                variable_block_sizes: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The ops take int32 contiguous lists (FastVideo's public wrapper converts, its ops do not)."""
    return tuple(t.to(torch.int32).contiguous() for t in (q2k_idx, q2k_num, variable_block_sizes))


def lists_as_64_token_blocks(q2k_idx: torch.Tensor, q2k_num: torch.Tensor,
                             variable_block_sizes: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """128-token block lists as the 64-token lists of the same attention: each query block becomes
    two with its list, each listed KV block b its halves 2b and 2b + 1 in place (a half with no
    token is left out), and KV block b's size splits into min(vbs, 64) and vbs - 64 (at least 0).
    FastVideo's block_sparse_attn_128 expands a dense map the same way for its 64-token Triton
    kernel, keeping the empty halves (so its own path does slightly more work than this)."""
    vbs64 = halve_block_sizes(variable_block_sizes, 64)
    idx = q2k_idx.to(torch.int64)
    entries = idx.shape[-1]
    halves = torch.stack([2 * idx, 2 * idx + 1], dim=-1)  # [..., entries, 2]
    listed = (torch.arange(entries, device=idx.device) < q2k_num.to(torch.int64)[..., None])[..., None]
    halves = torch.where(listed, halves, 0)  # list padding may hold anything
    kept = listed & (vbs64[halves] > 0)
    halves, kept = halves.flatten(-2), kept.flatten(-2)
    # Kept halves first, in list order (a stable sort on "left out"); the rest is padding.
    order = torch.sort((~kept).to(torch.int8), dim=-1, stable=True).indices
    idx64 = torch.where(kept.gather(-1, order), halves.gather(-1, order), 0)
    num64 = kept.sum(-1)
    return (idx64.repeat_interleave(2, dim=-2), num64.repeat_interleave(2, dim=-1), vbs64)


def tk_lse_base2(tk_lse: torch.Tensor, head_dim: int) -> torch.Tensor:
    """TK's second output L [B, H, S, 1] = -lse_e / scale, as vsa's base-2 lse [B, H, S]."""
    scale = 1.0 / math.sqrt(head_dim)
    return -tk_lse.squeeze(-1) * (scale / math.log(2.0))


def attention_op(tk: bool) -> Callable:
    """The custom op (q, k, v, *int32_lists) -> (out, lse), differentiable in q, k, v. TK's lse
    goes through tk_lse_base2; Triton's is base 2 already."""
    ops = _load("fastvideo_kernel.block_sparse_attn", tk)
    return ops.block_sparse_attn_sm90 if tk else ops.block_sparse_attn_triton


def _attention_peer(p: Problem, tk: bool) -> Runner:
    _check(*p.example[:2], p.block_size, tk, ATTENTION_BLOCKS)
    op = attention_op(tk)
    lists = (p.q2k_idx, p.q2k_num, p.variable_block_sizes)
    if p.block_size == 128:
        lists = lists_as_64_token_blocks(*lists)
    lists = int32_lists(*lists)
    return Runner(lambda q, k, v: op(q, k, v, *lists)[0])


def tk_attention(p: Problem) -> Runner:
    """FastVideo's ThunderKittens sm_90 kernel, forward and backward through its autograd."""
    return _attention_peer(p, tk=True)


def triton_attention(p: Problem) -> Runner:
    """FastVideo's Triton kernels, forward and backward through their autograd."""
    return _attention_peer(p, tk=False)


def _layer_peer(p: LayerProblem, tk: bool) -> Runner:
    _check(*p.example[:2], p.block_size, tk, LAYER_BLOCKS)
    video_sparse_attn = _load("fastvideo_kernel.ops", tk).video_sparse_attn
    vbs = p.variable_block_sizes

    def forward(q, k, v):
        return video_sparse_attn(q, k, v, vbs, vbs, p.topk, block_size=TILE_SIDE)

    # FASTVIDEO_VSA_TRITON=1 forces the Triton fine stage; 0 leaves FastVideo's default, which is
    # TK here because the extension loaded above.
    return Runner(forward, functools.partial(environment_variable, "FASTVIDEO_VSA_TRITON",
                                             "0" if tk else "1"))


def tk_layer(p: LayerProblem) -> Runner:
    """FastVideo's video_sparse_attn with its ThunderKittens fine stage."""
    return _layer_peer(p, tk=True)


def triton_layer(p: LayerProblem) -> Runner:
    """FastVideo's video_sparse_attn with its Triton fine stage."""
    return _layer_peer(p, tk=False)
