"""What one case runs on: block metadata, random q/k/v, and the selected KV blocks."""

from __future__ import annotations

from dataclasses import dataclass

import torch

import vsa

from .cases import Case
from .timing import rotation_count

SELECTIONS = ("random", "local")


@dataclass
class Blocks:
    """Static block metadata of a case."""

    variable_block_sizes: torch.Tensor  # [NK] real tokens in each block
    non_pad_index: torch.Tensor  # positions of the real tokens in the padded sequence


def block_metadata(case: Case, device: torch.device) -> Blocks:
    """The library's metadata for the case, checked against the case's own arithmetic."""
    if case.latent is None:
        vbs = torch.full((case.num_blocks,), case.block_size, dtype=torch.int32, device=device)
        return Blocks(vbs, torch.arange(case.seq_len, device=device))
    meta = vsa.build_vsa_metadata(case.latent, tile_size=case.tile, device=device)
    vbs = meta.variable_block_sizes
    if vbs.numel() != case.num_blocks or int(vbs.sum()) != case.valid_tokens:
        raise RuntimeError(f"{case.name}: library metadata ({vbs.numel()} blocks, "
                           f"{int(vbs.sum())} tokens) disagrees with the latent shape "
                           f"({case.num_blocks} blocks, {case.valid_tokens} tokens)")
    return Blocks(vbs, meta.non_pad_index)


def random_qkv(case: Case, dtype: torch.dtype, device: torch.device,
               generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v in BHSD over the padded sequence. Pad positions hold random values too: the
    kernels must mask them, so leaving them as noise (not zeros) is the honest test."""
    shape = (case.batch, case.heads, case.seq_len, case.head_dim)
    return tuple(torch.randn(shape, generator=generator, device=device).to(dtype) for _ in range(3))


def case_inputs(case: Case, dtype: torch.dtype, device: torch.device,
                seed: int) -> tuple[Blocks, list[tuple[torch.Tensor, ...]], torch.Generator]:
    """A case's metadata and enough random input sets to rotate through (timing.rotation_count),
    with the generator that made them. Resets torch.compile first: each case gets compiled peers
    (FlexAttention) a fresh recompile budget, since shapes differ from case to case and past the
    limit torch.compile would silently fall back to eager."""
    torch.compiler.reset()
    generator = torch.Generator(device).manual_seed(seed)
    blocks = block_metadata(case, device)
    set_bytes = 4 * case.batch * case.heads * case.seq_len * case.head_dim * dtype.itemsize
    input_sets = [random_qkv(case, dtype, device, generator)
                  for _ in range(rotation_count(set_bytes, device))]
    return blocks, input_sets, generator


def zero_pad_tokens(inputs: tuple[torch.Tensor, ...],
                    non_pad_index: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The inputs with the block padding zeroed, as a model's tiled layer input has it (and as
    FastVideo's layer, whose block means sum whole blocks, needs it)."""
    real = torch.zeros(inputs[0].shape[2], dtype=torch.bool, device=inputs[0].device)
    real[non_pad_index] = True
    return tuple(t * real[:, None].to(t.dtype) for t in inputs)


def select_blocks(case: Case, topk: int, pattern: str, device: torch.device,
                  generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(q2k_idx, q2k_num) on device, selecting topk KV blocks for every query block, converted
    by the library's own topk_to_index. That runs on the CPU, which every build has: the lists
    are made once per case, off the timed path.

    random: an independent uniform choice per row (what FastVideo's benchmarks use).
    local: the topk blocks nearest in tile order, the shape attention maps of video models lean to.
    """
    b, h, n = case.batch, case.heads, case.num_blocks
    if pattern == "random":
        scores = torch.rand((b, h, n, n), generator=generator, device=device)
        chosen = scores.topk(topk, dim=-1).indices
    else:
        first = (torch.arange(n, device=device) - topk // 2).clamp(0, n - topk)
        rows = first[:, None] + torch.arange(topk, device=device)
        chosen = rows.expand(b, h, n, topk).contiguous()
    return tuple(t.to(device) for t in vsa.topk_to_index(chosen.cpu()))
