"""A small problem with partial blocks for vsa bench's GPU tests of its peers."""

import torch

import vsa
from vsa.bench.cases import TILE_SHAPES
from vsa.bench.problem import Problem

LATENT, HEADS, DIM = (9, 14, 20), 2, 128  # 60 blocks of 64, partial along every axis


def cropped_wan(gen: torch.Generator, topk: int, block: int = 64) -> tuple[Problem, torch.Tensor]:
    """bf16 q/k/v on the GPU with random top-k lists, and the positions of the real tokens.
    block 128: 4x4x8 tiles (36 blocks, some with fewer than 64 tokens)."""
    meta = vsa.build_vsa_metadata(LATENT, tile_size=TILE_SHAPES[block], device="cuda")
    vbs = meta.variable_block_sizes
    nk = vbs.numel()
    q, k, v = (torch.randn(1, HEADS, nk * block, DIM, generator=gen).to("cuda", torch.bfloat16)
               for _ in range(3))
    chosen = torch.rand(1, HEADS, nk, nk, generator=gen).topk(topk, dim=-1).indices
    q2k_idx, q2k_num = vsa.topk_to_index(chosen)
    return Problem((q, k, v), block, q2k_idx.cuda(), q2k_num.cuda(), vbs), meta.non_pad_index
