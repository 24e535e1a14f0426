"""A plain-torch float64 VSA layer for the tests (dense coarse attention over block
means + masked fine attention over the top-k lists), and random layer problems."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch

from attention_reference import reference_attention


def reference_means(x, counts, block):
    """[B, H, N*block, D] -> float64 [B, H, N, D]: mean over each block's first counts[n] tokens."""
    b, h, s, d = x.shape
    valid = (torch.arange(block) < counts.cpu().long()[:, None]).to(x.device)  # [N, block]
    blocks = x.double().reshape(b, h, s // block, block, d) * valid[None, None, :, :, None]
    return blocks.sum(dim=3) / counts.to(x.device).double().clamp(min=1)[None, None, :, None]


def reference_lists(scores, live, topk):
    """Each row's min(topk, live) live blocks of largest score (ties to the lower id),
    ascending, padded with -1; and the smallest score gap at the selection boundary."""
    ranked_scores, ranked = scores.masked_fill(~live, -math.inf).sort(dim=-1, descending=True, stable=True)
    take = min(topk, int(live.sum()))
    idx = torch.full(scores.shape[:-1] + (topk,), -1, dtype=torch.int64)
    idx[..., :take] = ranked[..., :take].sort(dim=-1).values.cpu()
    num = torch.full(scores.shape[:-1], take, dtype=torch.int64)
    margin = math.inf
    if 0 < take < int(live.sum()):
        margin = float((ranked_scores[..., take - 1] - ranked_scores[..., take]).min())
    return idx, num, margin


def reference_layer(q, k, v, vbs, q_vbs, topk, gate=None, *, block=64, scale=None, layout="bhsd",
                    lists=None):
    """(out, q2k_idx, q2k_num, margin) in float64, differentiable in q, k, v, gate.

    The fine stage attends to the reference's own top-k lists, or to `lists`
    (q2k_idx, q2k_num) when given.
    """
    t = (lambda x: x) if layout == "bhsd" else (lambda x: x.transpose(1, 2))
    qh, kh, vh = t(q), t(k), t(v)
    group = qh.shape[1] // kh.shape[1]
    scale = 1.0 / math.sqrt(qh.shape[-1]) if scale is None else scale
    q_c = reference_means(qh, q_vbs, block)
    k_c = reference_means(kh, vbs, block).repeat_interleave(group, dim=1)
    v_c = reference_means(vh, vbs, block).repeat_interleave(group, dim=1)
    scores = q_c @ k_c.transpose(-2, -1)
    live = (vbs > 0).to(scores.device)
    # Dead blocks get no weight; a finite fill keeps a row without live blocks
    # free of NaN (its weights are then all zero).
    weights = torch.softmax((scores * scale).masked_fill(~live, torch.finfo(scores.dtype).min), dim=-1)
    weights = weights * live
    coarse = (weights @ v_c).repeat_interleave(block, dim=2)

    idx, num, margin = reference_lists(scores.detach(), live, topk)
    if lists is not None:
        idx, num = (x.cpu() for x in lists)
    # Pad tokens of a query block (past q_vbs) attend to nothing: their output is coarse · gate.
    fine, _ = reference_attention(qh, kh, vh, idx, num, vbs.cpu(), scale=scale, q_vbs=q_vbs.cpu())
    out = fine + (coarse if gate is None else coarse * t(gate).double())
    return t(out), idx, num, margin


@dataclass
class LayerProblem:
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    vbs: torch.Tensor
    q_vbs: torch.Tensor
    gate: Optional[torch.Tensor]
    topk: int
    block: int
    layout: str

    def inputs(self):
        return self.q, self.k, self.v, self.vbs, self.q_vbs, self.topk

    def to(self, device):
        move = lambda x: None if x is None else x.to(device)  # noqa: E731
        return LayerProblem(move(self.q), move(self.k), move(self.v), move(self.vbs), move(self.q_vbs),
                            move(self.gate), self.topk, self.block, self.layout)


def draw_layer_problem(gen, *, batch=1, heads=2, kv_heads=None, nq=3, nk=5, dim=64, block=64,
                       topk=2, dtype=torch.float32, layout="bhsd", gated=True, vbs=None):
    """Random inputs with a full, a one-token and an empty KV block among partial ones."""
    kv_heads = kv_heads or heads

    def seq(h, n):
        shape = (batch, h, n * block, dim) if layout == "bhsd" else (batch, n * block, h, dim)
        return torch.randn(shape, generator=gen).to(dtype)

    if vbs is None:
        vbs = torch.randint(1, block + 1, (nk,), generator=gen)
        vbs[0], vbs[-1], vbs[nk // 2] = block, 0, 1
    q_vbs = torch.randint(1, block + 1, (nq,), generator=gen)
    q = seq(heads, nq)
    gate = torch.rand(q.shape, generator=gen).to(dtype) if gated else None
    return LayerProblem(q, seq(kv_heads, nk), seq(kv_heads, nk), torch.as_tensor(vbs), q_vbs, gate,
                        topk, block, layout)


def draw_clear_problem(gen, min_margin=1e-3, **case):
    """A problem whose float64 top-k has a clear boundary in every row, so float32
    scores select the same blocks (near-ties are a matter of rounding)."""
    for _ in range(20):
        p = draw_layer_problem(gen, **case)
        _, _, _, margin = reference_layer(*p.inputs(), p.gate, block=p.block, layout=p.layout)
        if margin > min_margin:
            return p
    raise AssertionError("no problem with a clear top-k boundary in 20 draws")
