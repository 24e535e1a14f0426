"""Benchmark cases: real video-model shapes and synthetic anchor rows (shapes FastVideo's kernels were timed on).

A case is either a latent video shape (T, H, W) after patching, cut into tiles that become the
sparse blocks (boundary tiles hold fewer real tokens: the partial blocks VSA masks), or a
synthetic sequence of whole blocks. Token and block counts are derived here from those shapes by
plain arithmetic; the library's own metadata (built in inputs.py) is checked against them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

# One sparse block is one (t, h, w) tile of the latent. 64-token blocks are VSA's 4x4x4 tiles;
# 128-token blocks double the tile along the width, usually the longest latent axis.
TILE_SHAPES = {64: (4, 4, 4), 128: (4, 4, 8)}
BLOCK_SIZES = tuple(TILE_SHAPES)
HEAD_DIMS = (64, 128)


@dataclass(frozen=True)
class Case:
    name: str
    about: str
    batch: int
    heads: int
    head_dim: int
    topk: int
    block_size: int = 64
    latent: tuple[int, int, int] | None = None  # (T, H, W) after patching; None for synthetic
    tokens: int | None = None  # synthetic only: sequence length, a whole number of blocks
    cpu: bool = False  # belongs to the scaled-down set a CPU run uses by default

    @property
    def tile(self) -> tuple[int, int, int]:
        return TILE_SHAPES[self.block_size]

    @property
    def tile_grid(self) -> tuple[int, int, int] | None:
        if self.latent is None:
            return None
        return tuple(math.ceil(n / t) for n, t in zip(self.latent, self.tile))

    @property
    def num_blocks(self) -> int:
        if self.latent is None:
            return self.tokens // self.block_size
        return math.prod(self.tile_grid)

    @property
    def seq_len(self) -> int:
        """Padded sequence length the sparse kernels see: whole blocks."""
        return self.num_blocks * self.block_size

    @property
    def valid_tokens(self) -> int:
        """Real tokens: what dense attention in the model attends over."""
        return math.prod(self.latent) if self.latent is not None else self.tokens

    @property
    def keep(self) -> float:
        return self.topk / self.num_blocks

    @property
    def partial_blocks(self) -> bool:
        return self.valid_tokens != self.seq_len

    def sparse_flops(self, topk: int | None = None) -> float:
        # FastVideo's count: every selected block counts as blk keys, partial or not.
        topk = self.topk if topk is None else topk
        return 4.0 * self.batch * self.heads * self.head_dim * self.seq_len * topk * self.block_size

    def dense_flops(self) -> float:
        return 4.0 * self.batch * self.heads * self.head_dim * self.valid_tokens**2

    def with_block_size(self, block_size: int) -> Case:
        """Same shape cut into other blocks, keeping the same fraction of KV blocks."""
        if block_size == self.block_size:
            return self
        changed = replace(self, block_size=block_size, topk=1)
        topk = max(1, round(self.keep * changed.num_blocks))
        return replace(changed, topk=min(topk, changed.num_blocks))

    def with_keep(self, keep: float) -> Case:
        return replace(self, topk=topk_for_keep(keep, self.num_blocks))

    def topks(self, keeps: list[float] | None) -> list[int]:
        """The distinct top-k of a --sparsity sweep, or the case's own."""
        if keeps is None:
            return [self.topk]
        return list(dict.fromkeys(topk_for_keep(k, self.num_blocks) for k in keeps))

    def result_fields(self, dtype: str) -> dict:
        """What every result row of this case repeats."""
        return dict(case=self.name, batch=self.batch, heads=self.heads, head_dim=self.head_dim,
                    block_size=self.block_size, num_blocks=self.num_blocks, seq_len=self.seq_len,
                    valid_tokens=self.valid_tokens, dtype=dtype)


def topk_for_keep(keep: float, num_blocks: int) -> int:
    return min(num_blocks, max(1, round(keep * num_blocks)))


def latent_case(latent: tuple[int, int, int], heads: int = 12, head_dim: int = 128) -> Case:
    """A user's own latent shape, keeping ~10 % of the blocks like the named cases."""
    shape = "x".join(map(str, latent))
    case = Case(f"latent-{shape}", f"custom latent {shape}", 1, heads, head_dim, 1, latent=latent)
    return case.with_keep(0.1)


_WAN_480P = (21, 30, 52)  # Wan2.1 81 frames 480x832, VAE 4x8x8, patch 1x2x2
_WAN_720P = (21, 45, 80)  # Wan2.1 81 frames 720x1280
_HUNYUAN_720P = (33, 45, 80)  # HunyuanVideo 129 frames 720x1280

CASES: dict[str, Case] = {
    c.name: c
    for c in (
        Case("wan2.1-1.3b-480p", "Wan2.1-T2V-1.3B 480p 81 frames", 1, 12, 128, 63,
             latent=_WAN_480P),
        Case("wan2.1-1.3b-480p-blk128", "same, 128-token 4x4x8 tiles", 1, 12, 128, 34, 128,
             latent=_WAN_480P),
        Case("wan2.1-14b-720p", "Wan2.1-T2V-14B 720p 81 frames", 1, 40, 128, 144, latent=_WAN_720P),
        Case("hunyuan-720p", "HunyuanVideo 720p 129 frames", 1, 24, 128, 216, latent=_HUNYUAN_720P),
        Case("synthetic-49k", "anchor row: B1 H16 S49152", 1, 16, 128, 64, tokens=49152),
        Case("synthetic-49k-top192", "same, topk 192", 1, 16, 128, 192, tokens=49152),
        Case("synthetic-49k-top768", "same, nothing skipped", 1, 16, 128, 768, tokens=49152),
        Case("synthetic-49k-blk128", "same shape, 128-token blocks", 1, 16, 128, 32, 128,
             tokens=49152),
        Case("synthetic-b2-16k", "anchor row: B2 H12 S16384", 2, 12, 128, 32, tokens=16384),
        Case("synthetic-b2-16k-blk128", "same, 128-token blocks", 2, 12, 128, 16, 128,
             tokens=16384),
        # Scaled down so a whole CPU run takes seconds on two cores.
        Case("cpu-wan-crop", "Wan 480p latent cropped to 9x14x20 (partial tiles)", 1, 2, 64, 12,
             latent=(9, 14, 20), cpu=True),
        Case("cpu-synthetic", "B2 H1 S2048, full blocks", 2, 1, 64, 4, tokens=2048, cpu=True),
        Case("cpu-synthetic-blk128", "B1 H2 S2048, 128-token blocks", 1, 2, 64, 2, 128, tokens=2048,
             cpu=True),
    )
}

# The anchor rows: what a GPU run measures unless told otherwise.
DEFAULT_GPU_CASES = ("wan2.1-1.3b-480p", "synthetic-49k", "synthetic-49k-top192",
                     "synthetic-49k-top768", "synthetic-b2-16k")
DEFAULT_CPU_CASES = tuple(name for name, c in CASES.items() if c.cpu)
# --op layer: the shape the layer's goals are stated for (issue 9), and one small CPU case.
DEFAULT_GPU_LAYER_CASES = ("wan2.1-1.3b-480p",)
DEFAULT_CPU_LAYER_CASES = ("cpu-wan-crop",)


def describe(case: Case) -> str:
    shape = ("latent " + "x".join(map(str, case.latent)) if case.latent else "synthetic")
    return (f"{case.name:<26} {shape:<18} B{case.batch} H{case.heads} D{case.head_dim} "
            f"blk{case.block_size} blocks={case.num_blocks} S={case.seq_len} "
            f"tokens={case.valid_tokens} topk={case.topk} ({case.keep:.1%})  {case.about}")
