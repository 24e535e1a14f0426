"""The CUDA forward kernel against a float64 reference, on every contract edge.

Runs only where a CUDA GPU is present (marked `gpu`); CI has none, the
project's GPU script (scripts/gpu.sh) runs these on the H200 and its log is
committed under bench/results/.
"""
import math

import pytest
import torch

import vsa

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

EMPTY_LSE = -1.0e30  # vsa's documented sentinel for rows that attend nothing


def make_problem(gen, *, batch, heads, kv_heads, nq, nk, blk, dim, max_kv, dtype, layout,
                 index_dtype=torch.int32, zero_rows=True, partial=True, duplicates=False):
    """Random q/k/v plus metadata exercising counts of 0, -1 padding and partial blocks."""
    def seq(h, n):
        shape = (batch, h, n * blk, dim) if layout == "bhsd" else (batch, n * blk, h, dim)
        return torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)

    q, k, v = seq(heads, nq), seq(kv_heads, nk), seq(kv_heads, nk)
    low = 0 if zero_rows else 1
    num = torch.randint(low, max_kv + 1, (batch, heads, nq), generator=gen)
    idx = torch.full((batch, heads, nq, max_kv), -1, dtype=torch.int64)
    for row in range(batch * heads * nq):
        b, h, i = row // (heads * nq), (row // nq) % heads, row % nq
        n = int(num[b, h, i])
        if duplicates and n >= 2:
            picks = torch.randint(0, nk, (n,), generator=gen)
            picks[1] = picks[0]
        else:
            picks = torch.randperm(nk, generator=gen)[:n]
        idx[b, h, i, :n] = picks
    if partial:
        vbs = torch.randint(0, blk + 1, (nk,), generator=gen)
        vbs[0] = blk
    else:
        vbs = torch.full((nk,), blk, dtype=torch.int64)
    return q, k, v, idx.to(index_dtype), num.to(index_dtype), vbs.to(index_dtype)


def reference(q, k, v, idx, num, vbs, *, layout, scale=None):
    """Dense float64 attention with the block list expanded to a token mask."""
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    q, k, v = (t.double() for t in (q, k, v))
    batch, heads, sq, dim = q.shape
    kv_heads, skv = k.shape[1], k.shape[2]
    nk = vbs.numel()
    blk = skv // nk
    k = k.repeat_interleave(heads // kv_heads, dim=1)
    v = v.repeat_interleave(heads // kv_heads, dim=1)
    scale = 1.0 / math.sqrt(dim) if scale is None else scale
    token_valid = (torch.arange(blk)[None, :] < vbs.cpu().long()[:, None]).reshape(-1)
    counts = torch.zeros(batch, heads, sq // blk, nk, dtype=torch.float64)
    for (b, h, i), n in zip(torch.cartesian_prod(*(torch.arange(s) for s in num.shape)).tolist(),
                            num.cpu().reshape(-1).tolist()):
        for j in idx.cpu()[b, h, i, :n].tolist():
            counts[b, h, i, j] += 1  # a duplicate block counts twice
    weight = counts.repeat_interleave(blk, dim=2).repeat_interleave(blk, dim=3)
    weight = weight * token_valid[None, None, None, :]
    s = torch.einsum("bhqd,bhkd->bhqk", q.cpu(), k.cpu()) * scale
    s_log2 = s * math.log2(math.e)
    masked = torch.where(weight > 0, s_log2, torch.tensor(-math.inf, dtype=torch.float64))
    row_max = masked.amax(dim=-1, keepdim=True)
    empty = torch.isinf(row_max)
    p = torch.where(weight > 0, weight * torch.exp2(s_log2 - torch.where(empty, 0.0, row_max)), 0.0)
    denom = p.sum(-1, keepdim=True)
    out = torch.where(empty, 0.0, p @ v.cpu() / torch.where(empty, 1.0, denom))
    lse = torch.where(empty, EMPTY_LSE, row_max + torch.log2(torch.where(empty, 1.0, denom))).squeeze(-1)
    if layout == "bshd":
        out = out.transpose(1, 2)
    return out, lse


def rel_err(x, ref):
    return float((x.double().cpu() - ref).norm() / ref.norm().clamp_min(1e-30))


def poison_allocator(nbytes):
    """Leave NaN in the caching allocator's free blocks so unwritten outputs show up."""
    junk = torch.full((nbytes // 4 + 1024,), float("nan"), device="cuda")
    del junk


def run_case(seed, **kw):
    gen = torch.Generator().manual_seed(seed)
    layout = kw["layout"]
    q, k, v, idx, num, vbs = make_problem(gen, **kw)
    ref_out, ref_lse = reference(q, k, v, idx, num, vbs, layout=layout)
    dev = [t.cuda() for t in (q, k, v, idx, num, vbs)]
    poison_allocator(q.numel() * 4 * 4)
    out, lse = vsa.block_sparse_attn(*dev, layout=layout)
    torch.cuda.synchronize()
    assert out.shape == q.shape and out.dtype == q.dtype and out.is_cuda
    assert torch.isfinite(out).all(), "some output element was not written"
    assert torch.isfinite(lse).all()
    assert rel_err(out, ref_out) <= 1e-2
    empty = ref_lse == EMPTY_LSE
    assert (out.double().cpu().masked_fill(~_rows_to_out(empty, layout), 0) == 0).all()
    assert (lse.cpu()[empty] == EMPTY_LSE).all()
    assert torch.allclose(lse.cpu()[~empty].double(), ref_lse[~empty], atol=2e-2, rtol=0)
    return out, lse


def _rows_to_out(empty_rows, layout):
    """Broadcastable mask over `out` selecting the empty rows."""
    m = empty_rows[..., None]
    return m.transpose(1, 2) if layout == "bshd" else m


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("dim", [64, 128])
@pytest.mark.parametrize("blk", [64, 128])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_forward_matches_reference(dtype, dim, blk, layout):
    seed = hash((str(dtype), dim, blk, layout)) % 10_000
    run_case(seed, batch=2, heads=4, kv_heads=2, nq=5, nk=7, blk=blk, dim=dim, max_kv=4,
             dtype=dtype, layout=layout, index_dtype=torch.int32 if dim == 64 else torch.int64)


@pytest.mark.parametrize("dim", [64, 128])
def test_duplicates_and_full_lists(dim):
    run_case(11, batch=1, heads=2, kv_heads=1, nq=3, nk=4, blk=64, dim=dim, max_kv=6,
             dtype=torch.bfloat16, layout="bhsd", duplicates=True, zero_rows=False)


def test_all_blocks_empty_gives_zero_rows():
    gen = torch.Generator().manual_seed(3)
    q, k, v, idx, num, vbs = make_problem(gen, batch=1, heads=2, kv_heads=2, nq=2, nk=3, blk=64,
                                          dim=64, max_kv=3, dtype=torch.bfloat16, layout="bhsd")
    vbs.zero_()
    out, lse = vsa.block_sparse_attn(*(t.cuda() for t in (q, k, v, idx, num, vbs)))
    assert (out == 0).all()
    assert (lse == EMPTY_LSE).all()


def test_need_lse_false_and_custom_scale():
    gen = torch.Generator().manual_seed(5)
    q, k, v, idx, num, vbs = make_problem(gen, batch=1, heads=2, kv_heads=2, nq=3, nk=3, blk=64,
                                          dim=128, max_kv=2, dtype=torch.bfloat16, layout="bhsd")
    out, lse = vsa.block_sparse_attn(*(t.cuda() for t in (q, k, v, idx, num, vbs)),
                                     scale=0.3, need_lse=False)
    assert lse is None
    ref_out, _ = reference(q, k, v, idx, num, vbs, layout="bhsd", scale=0.3)
    assert rel_err(out, ref_out) <= 1e-2


def test_strided_views_are_read_in_place():
    """A bshd view of a packed qkv tensor (row stride 3·H·D) is a valid input."""
    gen = torch.Generator().manual_seed(8)
    batch, s, heads, dim, blk = 1, 192, 2, 64, 64
    qkv = torch.randn(batch, s, 3, heads, dim, generator=gen).to(torch.bfloat16)
    q, k, v = qkv.unbind(2)
    idx = torch.tensor([[[[0, 2], [1, -1], [2, 0]]] * heads], dtype=torch.int32)
    num = torch.tensor([[[2, 1, 2]] * heads], dtype=torch.int32)
    vbs = torch.tensor([64, 40, 64], dtype=torch.int32)
    ref_out, _ = reference(q, k, v, idx, num, vbs, layout="bshd")
    qkv_d = qkv.cuda()
    qd, kd, vd = qkv_d.unbind(2)
    out, _ = vsa.block_sparse_attn(qd, kd, vd, idx.cuda(), num.cuda(), vbs.cuda(), layout="bshd")
    assert rel_err(out, ref_out) <= 1e-2


def test_large_wan_shape_sampled_rows():
    """Wan2.1-1.3B 480p geometry (624 blocks, partial tiles): check sampled query blocks."""
    meta = vsa.build_vsa_metadata((21, 30, 52), (4, 4, 4), device="cpu")
    vbs = meta.variable_block_sizes.to(torch.int32)
    nk, blk, heads, dim, topk = vbs.numel(), 64, 2, 128, 16
    gen = torch.Generator().manual_seed(21)
    q = torch.randn(1, heads, nk * blk, dim, generator=gen).to(torch.bfloat16)
    k = torch.randn(1, heads, nk * blk, dim, generator=gen).to(torch.bfloat16)
    v = torch.randn(1, heads, nk * blk, dim, generator=gen).to(torch.bfloat16)
    scores = torch.rand(1, heads, nk, nk, generator=gen)
    idx = scores.topk(topk, dim=-1).indices.to(torch.int32)
    num = torch.full((1, heads, nk), topk, dtype=torch.int32)
    out, lse = vsa.block_sparse_attn(*(t.cuda() for t in (q, k, v, idx, num, vbs)))
    one_list = torch.arange(topk, dtype=torch.int32).reshape(1, 1, 1, topk)
    full = torch.full((1, 1, 1), topk, dtype=torch.int32)
    for i in [0, 1, 311, nk - 1]:
        rows = slice(i * blk, (i + 1) * blk)
        for h in range(heads):
            # Gather the selected blocks into a small problem with one query block.
            blocks = idx[0, h, i].long()
            keys = k[0, h].reshape(nk, blk, dim)[blocks].reshape(1, 1, topk * blk, dim)
            vals = v[0, h].reshape(nk, blk, dim)[blocks].reshape(1, 1, topk * blk, dim)
            ref_out, ref_lse = reference(q[:, h:h + 1, rows], keys, vals, one_list, full, vbs[blocks],
                                         layout="bhsd")
            assert rel_err(out[:, h:h + 1, rows], ref_out) <= 1e-2
            assert torch.allclose(lse[0, h, rows].double().cpu(), ref_lse[0, 0], atol=2e-2)


def test_map_to_index_and_invert_on_gpu_match_cpu():
    gen = torch.Generator().manual_seed(13)
    block_map = torch.rand(2, 3, 9, 11, generator=gen) < 0.3
    idx_c, num_c = vsa.map_to_index(block_map)
    idx_g, num_g = vsa.map_to_index(block_map.cuda())
    assert torch.equal(idx_g.cpu(), idx_c) and torch.equal(num_g.cpu(), num_c)
    k2q_c, k2q_num_c = vsa.invert_indices(idx_c, num_c, 11)
    k2q_g, k2q_num_g = vsa.invert_indices(idx_g, num_g, 11)
    assert torch.equal(k2q_g.cpu().long(), k2q_c.long())
    assert torch.equal(k2q_num_g.cpu().long(), k2q_num_c.long())


def test_from_mask_runs_on_gpu():
    gen = torch.Generator().manual_seed(17)
    q, k, v, _, _, vbs = make_problem(gen, batch=1, heads=2, kv_heads=2, nq=4, nk=4, blk=64, dim=64,
                                      max_kv=4, dtype=torch.bfloat16, layout="bhsd")
    block_map = torch.rand(1, 2, 4, 4, generator=gen) < 0.5
    idx, num = vsa.map_to_index(block_map)
    ref_out, _ = reference(q, k, v, idx, num, vbs, layout="bhsd")
    out, _ = vsa.block_sparse_attn_from_mask(q.cuda(), k.cuda(), v.cuda(), block_map.cuda(), vbs.cuda())
    assert rel_err(out, ref_out) <= 1e-2


def test_is_supported_tells_the_truth_on_gpu():
    q = torch.randn(1, 2, 128, 64, device="cuda", dtype=torch.bfloat16)
    vbs = torch.full((2,), 64, device="cuda", dtype=torch.int32)
    assert vsa.is_supported(q, q, q, vbs)
    assert not vsa.is_supported(q.float(), q.float(), q.float(), vbs)


def test_forward_kernel_choice_and_override(monkeypatch):
    capability = torch.cuda.get_device_capability(0)
    hopper_code = capability == (9, 0) and "90a" in vsa.cuda_archs()
    monkeypatch.delenv("VSA_CUDA_KERNEL", raising=False)
    assert vsa.cuda_forward_kernel(0) == ("sm90" if hopper_code else "sm80")
    monkeypatch.setenv("VSA_CUDA_KERNEL", "sm80")
    assert vsa.cuda_forward_kernel(0) == "sm80"
    # The portable kernel forced on any GPU still gives the right answer.
    run_case(11, batch=2, heads=4, kv_heads=2, nq=5, nk=7, blk=64, dim=128, max_kv=4,
             dtype=torch.bfloat16, layout="bhsd", index_dtype=torch.int32)
    monkeypatch.setenv("VSA_CUDA_KERNEL", "sm75")
    with pytest.raises(ValueError, match="VSA_CUDA_KERNEL"):
        vsa.cuda_forward_kernel(0)
    if not hopper_code:
        monkeypatch.setenv("VSA_CUDA_KERNEL", "sm90")
        with pytest.raises(vsa.UnsupportedError, match="sm90"):
            vsa.cuda_forward_kernel(0)
