"""vsa bench's float64 reference and FlexAttention block mask against dense masked softmax."""

import math

import pytest
import torch

from vsa.bench.peers import flex_block_mask
from vsa.bench.problem import Problem
from vsa.bench.reference import reference_blocks, reference_dq_blocks, relative_error, sample_query_blocks

B, H, HKV, BLK, NK, D = 2, 4, 2, 16, 6, 8


def _problem(g):
    q = torch.randn(B, H, NK * BLK, D, generator=g)
    k, v = (torch.randn(B, HKV, NK * BLK, D, generator=g) for _ in range(2))
    vbs = torch.tensor([BLK, 5, 0, BLK, 11, 1], dtype=torch.int32)  # partial and empty blocks
    idx = torch.stack([torch.randperm(NK, generator=g)[:4]
                       for _ in range(B * H * NK)]).reshape(B, H, NK, 4).to(torch.int32)
    num = torch.randint(1, 5, (B, H, NK), generator=g, dtype=torch.int32)
    num[0, 0, 0] = 0  # a row with nothing listed
    idx[0, 0, 1, :1], num[0, 0, 1] = 2, 1  # a row whose only block is empty
    idx[num[..., None] <= torch.arange(4)] = -1  # padding is never read
    return q, k, v, idx, num, vbs


def _dense_masked(q, k, v, idx, num, vbs):
    """Token-level mask over the whole sequence, softmax by explicit exp / sum."""
    block = torch.zeros(B, H, NK, NK, dtype=torch.bool)
    for b in range(B):
        for h in range(H):
            for i in range(NK):
                block[b, h, i, idx[b, h, i, : num[b, h, i]].long()] = True
    key_ok = (torch.arange(BLK)[None] < vbs[:, None]).reshape(-1)
    mask = block.repeat_interleave(BLK, 2).repeat_interleave(BLK, 3) & key_ok
    kk, vv = (t.double().repeat_interleave(H // HKV, 1) for t in (k, v))
    s = q.double() @ kk.transpose(-1, -2) / math.sqrt(D)
    s = s.masked_fill(~mask, -math.inf)
    m = s.amax(-1, keepdim=True).clamp_min(-1e300)
    e = torch.exp(s - m)
    denom = e.sum(-1, keepdim=True)
    return torch.where(denom > 0, (e @ vv) / denom.clamp_min(1e-300), torch.zeros(()))


def test_reference_matches_dense_masked_softmax(gen):
    q, k, v, idx, num, vbs = _problem(gen)
    dense = _dense_masked(q, k, v, idx, num, vbs)
    samples = [(b, h, i) for b in range(B) for h in range(H) for i in range(NK)]
    ref = reference_blocks(q, k, v, idx, num, vbs, samples)
    assert ref.dtype == torch.float64 and ref.shape == (len(samples), BLK, D)
    assert relative_error(dense, ref, samples) < 1e-12
    assert ref[0].abs().max() == 0 and ref[1].abs().max() == 0  # empty rows are exactly zero


def test_dq_reference_matches_autograd_of_the_dense_masked_softmax(gen):
    q, k, v, idx, num, vbs = _problem(gen)
    dout = torch.randn(q.shape, generator=gen, dtype=torch.float64)
    leaf = q.double().requires_grad_()
    (want,) = torch.autograd.grad(_dense_masked(leaf, k, v, idx, num, vbs), leaf, dout)
    samples = [(b, h, i) for b in range(B) for h in range(H) for i in range(NK)]
    ref = reference_dq_blocks(q, k, v, idx, num, vbs, samples, dout)
    assert ref.dtype == torch.float64 and ref.shape == (len(samples), BLK, D)
    assert relative_error(want, ref, samples) < 1e-12
    assert ref[0].abs().max() == 0 and ref[1].abs().max() == 0  # rows with no key: dq is zero


def test_relative_error_is_relative(gen):
    q, k, v, idx, num, vbs = _problem(gen)
    samples = [(1, 3, 5), (0, 2, 4)]
    for b, h, i in samples:  # real keys for sure: a draw listing only the empty block 2 gave 0 == 0.01
        idx[b, h, i], num[b, h, i] = torch.tensor([0, 3, 4, 1], dtype=torch.int32), 4
    ref = reference_blocks(q, k, v, idx, num, vbs, samples)
    out = torch.zeros(B, H, NK * BLK, D, dtype=torch.float64)
    for n, (b, h, i) in enumerate(samples):
        out[b, h, i * BLK:(i + 1) * BLK] = ref[n] * 1.01
    assert relative_error(out, ref, samples) == pytest.approx(0.01)


def test_relative_error_on_real_rows_ignores_the_padding_rows(gen):
    q, k, v, idx, num, vbs = _problem(gen)
    idx[1, 3, 5], num[1, 3, 5] = torch.tensor([0, 3, 4, 1], dtype=torch.int32), 4  # real keys for sure
    samples = [(1, 3, 5), (0, 2, 4)]
    ref = reference_blocks(q, k, v, idx, num, vbs, samples)
    real_rows = torch.full((NK,), BLK)
    real_rows[5], real_rows[4] = 7, 0  # block 4: no real row
    out = torch.zeros(B, H, NK * BLK, D, dtype=torch.float64)
    for n, (b, h, i) in enumerate(samples):
        out[b, h, i * BLK:(i + 1) * BLK] = ref[n] * 1.01
        out[b, h, i * BLK + int(real_rows[i]):(i + 1) * BLK] = 1e6  # padding rows: anything
    assert relative_error(out, ref, samples, real_rows=real_rows) == pytest.approx(0.01)
    assert relative_error(out, ref, samples) > 1.0


def test_samples_are_distinct_and_include_the_last_block(gen):
    samples = sample_query_blocks(2, 3, 10, 8, gen)
    assert len(samples) == len(set(samples)) == 8
    assert (1, 2, 9) in samples
    assert all(0 <= b < 2 and 0 <= h < 3 and 0 <= i < 10 for b, h, i in samples)
    assert sample_query_blocks(1, 1, 4, 0, gen) == []
    assert len(sample_query_blocks(1, 1, 4, 9, gen)) == 4  # no more than there are


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_flex_block_mask_is_exact(gen):
    # Eager FlexAttention on the CPU follows mask_mod, the compiled GPU kernel the block lists:
    # both must state the same selection.
    q, k, v, idx, num, vbs = _problem(gen)
    k, v = (t.repeat_interleave(H // HKV, 1) for t in (k, v))
    mask = flex_block_mask(Problem((q, k, v), BLK, idx, num, vbs))
    listed = torch.arange(4) < num[..., None]
    for b in range(B):
        for h in range(H):
            for i in range(NK):
                rows = set(idx[b, h, i][listed[b, h, i]].tolist())
                full = mask.full_kv_indices[b, h, i, : mask.full_kv_num_blocks[b, h, i]]
                part = mask.kv_indices[b, h, i, : mask.kv_num_blocks[b, h, i]]
                full, part = set(full.tolist()), set(part.tolist())
                assert full | part == rows and not full & part
                assert all(vbs[j] == BLK for j in full)
    from torch.nn.attention.flex_attention import flex_attention

    out = flex_attention(q, k, v, block_mask=mask)
    samples = [(b, h, i) for b in range(B) for h in range(H) for i in range(NK)]
    ref = reference_blocks(q, k, v, idx, num, vbs, samples)
    # Flex gives NaN-free zeros for fully masked rows, like the op contract.
    assert relative_error(out, ref, samples) < 1e-5
