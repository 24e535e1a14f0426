"""FlexAttention as a benchmark peer: the exact BlockMask of a block selection, and the kernel tiles
that let torch's compiled FlexAttention run (forward and backward) on 64-token sparse blocks."""

from __future__ import annotations

import dataclasses
import functools

import torch

# The smallest sparse block the benchmark uses (cases.BLOCK_SIZES); flex's tiles must divide it.
SMALLEST_BLOCK = 64


@functools.cache
def compiled_flex():
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False)


def selection_map(q2k_idx: torch.Tensor, q2k_num: torch.Tensor, num_kv_blocks: int) -> torch.Tensor:
    """[B, H, NQ, NK] bool: which KV blocks each query block lists (the first q2k_num entries)."""
    listed = torch.arange(q2k_idx.shape[-1], device=q2k_idx.device) < q2k_num[..., None]
    # Unlisted entries scatter into a spare last column that is then dropped.
    cols = torch.where(listed, q2k_idx.long(), num_kv_blocks)
    selected = torch.zeros((*q2k_idx.shape[:-1], num_kv_blocks + 1), dtype=torch.bool,
                           device=q2k_idx.device)
    return selected.scatter_(-1, cols, True)[..., :num_kv_blocks]


def _ordered(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Block lists of a [.., NQ, NK] bool map: counts, and column ids with the set ones first."""
    as_int = mask.to(torch.int32)
    order = torch.argsort(as_int, dim=-1, descending=True, stable=True)
    return as_int.sum(-1, dtype=torch.int32), order.to(torch.int32)


def block_mask(selected: torch.Tensor, variable_block_sizes: torch.Tensor, block_size: int):
    """The exact FlexAttention BlockMask of a [B, H, NQ, NK] block selection.

    Whole blocks go in the 'full' lists, which the compiled kernel runs without mask_mod; only
    partial blocks pay for the per-element mask. mask_mod still states the whole selection,
    because FlexAttention's semantics (and its eager path) are mask_mod's, the block lists
    being only the skipping plan."""
    from torch.nn.attention.flex_attention import BlockMask

    whole = variable_block_sizes == block_size
    partial_num, partial_idx = _ordered(selected & ~whole)
    full_num, full_idx = _ordered(selected & whole)
    valid = variable_block_sizes.long()

    def selected_valid_key(b, h, q_idx, kv_idx):
        block = kv_idx // block_size
        return selected[b, h, q_idx // block_size, block] & ((kv_idx % block_size) < valid[block])

    return BlockMask.from_kv_blocks(partial_num, partial_idx, full_num, full_idx,
                                    BLOCK_SIZE=block_size, mask_mod=selected_valid_key)


def kernel_options(block_size: int) -> dict:
    """Forward tiles that divide a 64-token sparse block: flex's default forward tile on sm_90 is
    128 rows, which torch < 2.14 rejects for 64-token blocks instead of shrinking it. The fwd_
    prefix keeps them out of the backward, whose tiles allow_backward_on_small_blocks fixes."""
    return {"fwd_BLOCK_M": block_size, "fwd_BLOCK_N": block_size} if block_size < 128 else {}


def fit_backward_tiles(configs: list, block_size: int) -> list:
    """configs plus, for each, its tiles shrunk to divide block_size: what torch >= 2.14 does
    itself. A config keeps its warps and stages; the kernel's own constraints (BLOCK_N1 a multiple
    of BLOCK_M1, BLOCK_M2 of BLOCK_N2) still hold because every size is a power of two."""
    fitted = list(configs)
    for conf in configs:
        m1, n1, m2, n2 = (min(t, block_size) for t in
                          (conf.block_m1, conf.block_n1, conf.block_m2, conf.block_n2))
        shrunk = dataclasses.replace(conf, block_m1=min(m1, n1), block_n1=n1, block_m2=m2,
                                     block_n2=min(n2, m2))
        if shrunk not in fitted:
            fitted.append(shrunk)
    return fitted


def backward_needs_fitting() -> bool:
    """torch < 2.14 filters its built-in backward configs by 'sparse block % tile == 0' before it
    reads any kernel option, and on sm_90 at head dim 128 its only default config has 128-wide
    tiles: 64-token blocks leave no candidate ('NoValidChoicesError: No choices to select').
    2.14 shrinks the tiles itself and honours bwd_BLOCK_* options."""
    return torch.torch_version.TorchVersion(torch.__version__) < (2, 14)


def allow_backward_on_small_blocks() -> None:
    """On torch < 2.14, offer inductor a copy of each built-in backward config with tiles that
    divide a 64-token block (torch 2.14's own shrink), so 64-token flex has a backward there.

    Patched on the InductorChoices class, the documented place for out-of-tree heuristics,
    rather than through V.set_choices_handler: that handler is thread-local, and the lazily
    compiled backward lowers on the autograd engine's device thread. Idempotent; 128-token
    blocks then choose between the original and the shrunk config by inductor's autotuning."""
    if not backward_needs_fitting():
        return
    from torch._inductor.choices import InductorChoices

    original = InductorChoices.get_flex_attention_bwd_configs
    if getattr(original, "fits_small_blocks", False):
        return

    @functools.wraps(original)
    def fitted(self, *args, **kwargs):
        return fit_backward_tiles(original(self, *args, **kwargs), SMALLEST_BLOCK)

    fitted.fits_small_blocks = True
    InductorChoices.get_flex_attention_bwd_configs = fitted
