"""Float64 reference for a sample of query blocks: their outputs, and their rows of dq.

The whole S x S reference would cost more than the benchmark itself at video sizes, so only a
few (batch, head, query block) triples are checked: gather that block's selected KV blocks, mask
the keys past each block's valid count, and take the softmax in float64 on the inputs' device.
A query row's dq needs only its own row of the attention (dS = P ∘ (dP − rowsum(dO ∘ O)),
dq = scale · dS · K); dk and dv sum over every row that lists a block, so they are not sampled.
"""

from __future__ import annotations

import math

import torch

Sample = tuple[int, int, int]  # (batch, head, query block)


def sample_query_blocks(batch: int, heads: int, num_blocks: int, count: int,
                        generator: torch.Generator) -> list[Sample]:
    """count distinct triples; the last query block is always among them because in latent
    cases it is a boundary tile, where partial-block bugs show."""
    if count < 1:
        return []
    total = batch * heads * num_blocks
    picks = sorted(torch.randperm(total - 1, generator=generator)[: count - 1].tolist())
    picks.append(total - 1)
    return [(p // (heads * num_blocks), p // num_blocks % heads, p % num_blocks) for p in picks]


def _sampled_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q2k_idx: torch.Tensor,
                       q2k_num: torch.Tensor, variable_block_sizes: torch.Tensor, samples: list[Sample],
                       scale: float | None):
    """For each sample, in float64: (its block's rows of BHSD q, the listed keys and values,
    the softmax over them), and the scale."""
    blk = k.shape[2] // variable_block_sizes.numel()
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    group = q.shape[1] // k.shape[1]
    offsets = torch.arange(blk, device=q.device)
    for b, h, i in samples:
        blocks = q2k_idx[b, h, i, : int(q2k_num[b, h, i])].long()
        keys = (blocks[:, None] * blk + offsets).reshape(-1)
        valid = (offsets < variable_block_sizes[blocks].long()[:, None]).reshape(-1)
        qb = q[b, h, i * blk:(i + 1) * blk].double()
        kb, vb = k[b, h // group, keys].double(), v[b, h // group, keys].double()
        scores = (qb @ kb.T * scale).masked_fill(~valid, -math.inf)
        probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # all-masked rows: 0/0 -> 0
        yield kb, vb, probs, scale


def reference_blocks(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q2k_idx: torch.Tensor,
                     q2k_num: torch.Tensor, variable_block_sizes: torch.Tensor,
                     samples: list[Sample], scale: float | None = None) -> torch.Tensor:
    """Exact outputs [len(samples), blk, D] in float64 for BHSD q/k/v (GQA allowed).

    A row with no valid key is zero, as the op contract says."""
    return torch.stack([probs @ vb for _, vb, probs, _ in
                        _sampled_attention(q, k, v, q2k_idx, q2k_num, variable_block_sizes, samples, scale)])


def reference_dq_blocks(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q2k_idx: torch.Tensor,
                        q2k_num: torch.Tensor, variable_block_sizes: torch.Tensor, samples: list[Sample],
                        dout: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """Exact dq [len(samples), blk, D] in float64 of the sampled blocks' rows, for the BHSD output
    gradient dout. A row with no valid key gets zero."""
    blk = k.shape[2] // variable_block_sizes.numel()
    dqs = []
    for (b, h, i), (kb, vb, probs, scale) in zip(
            samples, _sampled_attention(q, k, v, q2k_idx, q2k_num, variable_block_sizes, samples, scale)):
        do = dout[b, h, i * blk:(i + 1) * blk].double()
        dp = do @ vb.T
        ds = probs * (dp - (do * (probs @ vb)).sum(-1, keepdim=True))
        dqs.append(scale * ds @ kb)
    return torch.stack(dqs)


def relative_error(out: torch.Tensor, reference: torch.Tensor, samples: list[Sample],
                   real_rows: torch.Tensor | None = None) -> float:
    """Relative Frobenius error of out's sampled query blocks against the reference, over the
    real rows of each block (real_rows [NQ]; None: every row). A padding row's output is
    dropped by the model (untile), and vsa given q_variable_block_sizes does not compute it."""
    blk = reference.shape[1]
    got = torch.stack([out[b, h, i * blk:(i + 1) * blk] for b, h, i in samples]).double()
    if real_rows is not None:
        blocks = torch.tensor([i for _, _, i in samples], device=real_rows.device)
        real = torch.arange(blk, device=real_rows.device) < real_rows[blocks].long()[:, None]
        got, reference = got[real], reference[real]
    return float(torch.linalg.vector_norm(got - reference) /
                 torch.linalg.vector_norm(reference).clamp_min(1e-300))
