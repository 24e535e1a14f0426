"""How often vsa's top-k picks differ from FastVideo's on one shape (default: Wan2.1 480p,
B1 H12 D128, latent 21x30x52, 624 blocks, top-k 63).

vsa ranks exact integer scores of its float32 block means in block floating point, rounded
to float32 (ties to the lower block id; docs/layer.md).
FastVideo rounds the block means to bf16, computes the scores in bf16 and ranks them with
torch.topk (vsa.compat's re-implementation of its arithmetic). Both are run here on the same
bf16 inputs, padded with zeros as a tiled video is:

    python bench/layer/pick_difference.py                  # CPU is enough: only the coarse stage runs
    python bench/layer/pick_difference.py --smooth 4       # inputs correlated over ~4 latent voxels

Reports, over all (head, query block) rows: the share of picks that differ, the share of rows
with any difference, and how many rows have a tie at the top-k boundary under each arithmetic.
"""

from __future__ import annotations

import argparse
import math

import torch

import vsa
from vsa.compat.fastvideo_kernel.ops import selection as fastvideo_selection
from vsa.layer import block_means, coarse_stage


def video_like(shape, latent, smooth: int, gen: torch.Generator) -> torch.Tensor:
    """[1, H, T*Hh*W, D] normal values in raster order; with smooth > 1 each channel is
    averaged over a smooth^3 neighbourhood (then rescaled to unit variance), so nearby
    tokens, and with them neighbouring blocks, look alike as in a real video."""
    _, heads, _, dim = shape
    x = torch.randn((heads * dim, 1) + tuple(latent), generator=gen)
    if smooth > 1:
        x = torch.nn.functional.avg_pool3d(x, smooth, stride=1, padding=smooth // 2, count_include_pad=False)
        x = x[..., :latent[0], :latent[1], :latent[2]]
        x = x / x.std()
    return x.reshape(heads, dim, -1).permute(0, 2, 1).unsqueeze(0)


def padded(tokens: torch.Tensor, meta) -> torch.Tensor:
    """Raster tokens [1, H, N, D] -> the tiled, zero-padded sequence [1, H, padded_length, D] (bf16)."""
    out = tokens.new_zeros(tokens.shape[:2] + (meta.padded_length, tokens.shape[-1]))
    out[:, :, meta.non_pad_index] = tokens[:, :, meta.tile_partition_indices]
    return out.to(torch.bfloat16)


def boundary_ties(scores: torch.Tensor, topk: int) -> int:
    """Rows whose top-k-th and (k+1)-th largest scores are equal."""
    ordered = torch.sort(scores.float(), dim=-1, descending=True).values
    return int((ordered[..., topk - 1] == ordered[..., topk]).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latent", type=int, nargs=3, default=(21, 30, 52), metavar=("T", "H", "W"))
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--topk", type=int, default=63)
    parser.add_argument("--smooth", type=int, default=1, help="neighbourhood of the input correlation")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    gen = torch.Generator().manual_seed(args.seed)
    meta = vsa.build_vsa_metadata(tuple(args.latent))
    vbs = meta.variable_block_sizes
    raster = (1, args.heads, math.prod(args.latent), args.head_dim)
    q, k, v = (padded(video_like(raster, args.latent, args.smooth, gen), meta) for _ in range(3))

    q_mean, k_mean, v_mean = block_means(q, k, v, vbs, vbs)
    _, idx, num = coarse_stage(q_mean, k_mean, v_mean, vbs, args.topk)
    assert bool((num == args.topk).all()), "every block of this shape is live"
    fv_scores, fv_idx = fastvideo_selection(q, k, vbs, vbs, args.topk, meta.block_size, "bhsd")
    ours_scores = torch.matmul(q_mean, k_mean.transpose(-2, -1))

    ours = torch.zeros(fv_scores.shape, dtype=torch.bool).scatter_(-1, idx.long(), True)
    theirs = torch.zeros(fv_scores.shape, dtype=torch.bool).scatter_(-1, fv_idx, True)
    differing = (ours & ~theirs).sum(-1)  # picks of ours that FastVideo does not make
    rows = differing.numel()
    print(f"latent {tuple(args.latent)}: {meta.num_tiles} blocks, H{args.heads} D{args.head_dim}, "
          f"top-k {args.topk}, smooth {args.smooth}, seed {args.seed}")
    print(f"  picks that differ: {int(differing.sum())} of {rows * args.topk} "
          f"({100 * float(differing.sum()) / (rows * args.topk):.2f} %)")
    print(f"  rows with any difference: {int((differing > 0).sum())} of {rows} "
          f"({100 * float((differing > 0).sum()) / rows:.1f} %), at most {int(differing.max())} in a row")
    print(f"  rows tied at the top-k boundary: bf16 scores (FastVideo) {boundary_ties(fv_scores, args.topk)}, "
          f"float32 scores (vsa) {boundary_ties(ours_scores, args.topk)}")


if __name__ == "__main__":
    main()
