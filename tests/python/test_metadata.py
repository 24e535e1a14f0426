"""Block lists and the VSA tiling against hand-computed cases and independent
pure-torch implementations written here."""

import math

import numpy as np
import pytest
import torch

import vsa


# ---- independent implementations -----------------------------------------------------------

def lists_from_map(block_map):
    """Python loops: selected block ids ascending, then -1."""
    b, h, nq, nk = block_map.shape
    idx = torch.full((b, h, nq, nk), -1, dtype=torch.int64)
    num = block_map.sum(-1)
    for row, mask in zip(idx.view(-1, nk), block_map.reshape(-1, nk)):
        ids = [j for j in range(nk) if mask[j]]
        row[:len(ids)] = torch.tensor(ids, dtype=torch.int64)
    return idx, num


def inverted_lists(q2k_idx, q2k_num, nk, max_q):
    b, h, nq, _ = q2k_idx.shape
    idx = torch.full((b, h, nk, max_q), -1, dtype=torch.int64)
    num = torch.zeros((b, h, nk), dtype=torch.int64)
    for bi in range(b):
        for hi in range(h):
            for i in range(nq):  # ascending i: each KV list comes out sorted
                for j in q2k_idx[bi, hi, i, :int(q2k_num[bi, hi, i])].tolist():
                    idx[bi, hi, j, num[bi, hi, j]] = i
                    num[bi, hi, j] += 1
    return idx, num


def torch_tiling(latent, tile):
    """Tile id of every raster token from coordinates; a stable sort by tile id gives the order."""
    t, h, w = latent
    tt, th, tw = tile
    nt, nh, nw = (math.ceil(n / s) for n, s in zip(latent, tile))
    ct, ch, cw = torch.meshgrid(torch.arange(t), torch.arange(h), torch.arange(w), indexing="ij")
    tile_id = ((ct // tt) * nh * nw + (ch // th) * nw + (cw // tw)).reshape(-1)
    order = torch.sort(tile_id, stable=True).indices
    vbs = torch.bincount(tile_id, minlength=nt * nh * nw)
    block = tt * th * tw
    non_pad = torch.cat([b * block + torch.arange(n) for b, n in enumerate(vbs.tolist())])
    return order, vbs, non_pad


# ---- block lists ---------------------------------------------------------------------------------

def test_map_to_index_hand_case():
    block_map = torch.tensor([[[[True, False, True], [False, False, False]]]])
    idx, num = vsa.map_to_index(block_map)
    assert idx.tolist() == [[[[0, 2, -1], [-1, -1, -1]]]]
    assert num.tolist() == [[[2, 0]]]
    assert idx.dtype == num.dtype == torch.int32


def test_map_to_index_random(gen):
    block_map = torch.rand(2, 3, 5, 7, generator=gen) > 0.6
    idx, num = vsa.map_to_index(block_map)
    want_idx, want_num = lists_from_map(block_map)
    assert torch.equal(idx.long(), want_idx) and torch.equal(num.long(), want_num)


def test_map_to_index_accepts_strided_maps(gen):
    block_map = (torch.rand(1, 2, 6, 4, generator=gen) > 0.5).transpose(2, 3)
    idx, _ = vsa.map_to_index(block_map)
    assert torch.equal(idx.long(), lists_from_map(block_map.contiguous())[0])


def test_from_mask_equals_lists(gen):
    q, k, v = (torch.randn(1, 2, 128, 64, generator=gen) for _ in range(3))
    block_map = torch.rand(1, 2, 2, 2, generator=gen) > 0.4
    vbs = torch.tensor([64, 33])
    out_mask, lse_mask = vsa.block_sparse_attn_from_mask(q, k, v, block_map, vbs)
    out_list, lse_list = vsa.block_sparse_attn(q, k, v, *lists_from_map(block_map), vbs)
    assert torch.equal(out_mask, out_list) and torch.equal(lse_mask, lse_list)


def test_topk_to_index(gen):
    topk = torch.stack([torch.randperm(9, generator=gen)[:4] for _ in range(6)]).view(1, 2, 3, 4)
    idx, num = vsa.topk_to_index(topk.to(torch.int16))
    assert torch.equal(idx.long(), topk.sort(-1).values)
    assert torch.all(num == 4) and num.shape == (1, 2, 3)


def test_invert_indices_hand_case():
    q2k_idx = torch.tensor([[[[2, 0], [0, -1], [1, 2]]]])
    q2k_num = torch.tensor([[[2, 1, 1]]])  # row 2 lists only block 1
    k2q_idx, k2q_num = vsa.invert_indices(q2k_idx, q2k_num, 3)
    assert k2q_idx.tolist() == [[[[0, 1, -1], [2, -1, -1], [0, -1, -1]]]]
    assert k2q_num.tolist() == [[[2, 1, 1]]]


def test_invert_indices_random(gen):
    from attention_reference import random_lists
    q2k_idx, q2k_num = random_lists(gen, 2, 2, 5, 4, 3)
    k2q_idx, k2q_num = vsa.invert_indices(q2k_idx, q2k_num, 4)
    want_idx, want_num = inverted_lists(q2k_idx, q2k_num, 4, 5)
    assert torch.equal(k2q_idx.long(), want_idx) and torch.equal(k2q_num.long(), want_num)


def test_invert_indices_overflow_is_an_error():
    q2k_idx = torch.tensor([[[[0], [0], [0]]]])
    with pytest.raises(ValueError, match="k2q"):
        vsa.invert_indices(q2k_idx, torch.ones(1, 1, 3, dtype=torch.int64), 1, max_q=2)


@pytest.mark.parametrize("max_q", [0, -1, 2.5, True])
def test_invert_indices_names_a_bad_max_q(max_q):
    q2k_idx = torch.tensor([[[[0], [0], [0]]]])
    with pytest.raises(ValueError, match="'max_q'"):
        vsa.invert_indices(q2k_idx, torch.ones(1, 1, 3, dtype=torch.int64), 1, max_q=max_q)
    k2q_idx, _ = vsa.invert_indices(q2k_idx, torch.ones(1, 1, 3, dtype=torch.int64), 1, max_q=np.int64(3))
    assert k2q_idx.tolist() == [[[[0, 1, 2]]]]


@pytest.mark.parametrize("num_kv_blocks", [0, -1, 2.5, 1.9, True, "2", None])
def test_invert_indices_names_a_bad_num_kv_blocks(num_kv_blocks):
    # int() read 2.5 as 2 and 1.9 as 1 (lists for another NK), True as 1 (the error then named
    # q2k_idx), and -1 failed in torch ("negative dimension").
    q2k_idx = torch.tensor([[[[0], [1], [0]]]])
    with pytest.raises(ValueError, match="'num_kv_blocks'"):
        vsa.invert_indices(q2k_idx, torch.ones(1, 1, 3, dtype=torch.int64), num_kv_blocks)
    _, k2q_num = vsa.invert_indices(q2k_idx, torch.ones(1, 1, 3, dtype=torch.int64), np.int64(2))
    assert k2q_num.tolist() == [[[2, 1]]]


# ---- tiling ----------------------------------------------------------------------------------------

def test_tiling_hand_case():
    # latent (1, 2, 3) in (1, 2, 2) tiles: tile 0 holds raster tokens 0, 1, 3, 4; tile 1 holds 2, 5.
    meta = vsa.build_vsa_metadata((1, 2, 3), (1, 2, 2))
    assert meta.tile_partition_indices.tolist() == [0, 1, 3, 4, 2, 5]
    assert meta.reverse_tile_partition_indices.tolist() == [0, 1, 4, 2, 3, 5]
    assert meta.variable_block_sizes.tolist() == [4, 2]
    assert meta.non_pad_index.tolist() == [0, 1, 2, 3, 4, 5]
    assert (meta.num_tiles, meta.tile_counts, meta.block_size) == (2, (1, 1, 2), 4)


@pytest.mark.parametrize("latent", [(4, 8, 8), (5, 6, 9), (1, 1, 1), (21, 30, 52)])
def test_tiling_matches_torch_implementation(latent):
    meta = vsa.build_vsa_metadata(latent)
    order, vbs, non_pad = torch_tiling(latent, (4, 4, 4))
    assert torch.equal(meta.tile_partition_indices, order)
    assert torch.equal(meta.reverse_tile_partition_indices, torch.argsort(order))
    assert torch.equal(meta.variable_block_sizes.long(), vbs)
    assert torch.equal(meta.non_pad_index, non_pad)
    assert meta.num_tiles == vbs.numel() and meta.block_size == 64
    assert meta.tile_partition_indices.dtype == torch.int64
    assert meta.variable_block_sizes.dtype == torch.int32


def test_metadata_is_cached_per_arguments():
    a = vsa.build_vsa_metadata((3, 5, 7), (4, 4, 4), "cpu")
    assert vsa.build_vsa_metadata([3, 5, 7], device=torch.device("cpu")) is a
    assert vsa.build_vsa_metadata((3, 5, 7), (2, 4, 4)) is not a


# Extents are counts: int() made 2.5 a silent 2 (the tiling of another latent) and True a 1;
# a bare int raised TypeError ('int' object is not iterable).
@pytest.mark.parametrize("bad", [(0, 4, 4), (4, 4), (4, -1, 4), (2.5, 4, 4), (4, True, 4), 64],
                         ids=str)
def test_metadata_rejects_bad_shapes(bad):
    with pytest.raises(ValueError, match="'latent_shape'"):
        vsa.build_vsa_metadata(bad)
    with pytest.raises(ValueError, match="'tile_size'"):
        vsa.build_vsa_metadata((4, 4, 4), bad)


def test_metadata_takes_integer_extents_of_any_type():
    want = vsa.build_vsa_metadata((3, 5, 7), (4, 4, 4))
    assert vsa.build_vsa_metadata(np.array([3, 5, 7]), torch.tensor([4, 4, 4])) is want


def test_tile_untile_round_trip(gen):
    meta = vsa.build_vsa_metadata((3, 5, 6))
    x = torch.randn(2, 90, 3, 8, generator=gen, requires_grad=True)
    tiled = vsa.tile(x, meta)
    assert tiled.shape == (2, meta.num_tiles * 64, 3, 8)
    pad = torch.ones(meta.num_tiles * 64, dtype=torch.bool)
    pad[meta.non_pad_index] = False
    assert torch.all(tiled[:, pad] == 0)
    assert torch.equal(tiled[:, meta.non_pad_index], x[:, meta.tile_partition_indices])
    assert torch.equal(vsa.untile(tiled, meta), x)
    tiled.sum().backward()  # differentiable: every real token gets gradient 1
    assert torch.equal(x.grad, torch.ones_like(x))


def test_tile_along_another_dim(gen):
    meta = vsa.build_vsa_metadata((2, 4, 5))
    x = torch.randn(1, 2, 40, 4, generator=gen)  # [B, H, S, D]
    assert torch.equal(vsa.untile(vsa.tile(x, meta, dim=2), meta, dim=2), x)


def test_tile_rejects_wrong_length(gen):
    meta = vsa.build_vsa_metadata((2, 4, 5))
    with pytest.raises(ValueError, match="'x.shape'"):
        vsa.tile(torch.randn(1, 41, 2, 4, generator=gen), meta)


@pytest.mark.parametrize("dim", [4, -5, 1.0, True], ids=str)
def test_tile_and_untile_name_a_dim_that_is_no_axis(gen, dim):
    # An axis past the rank raised IndexError ('tuple index out of range'), a float one TypeError;
    # True was read as axis 1.
    meta = vsa.build_vsa_metadata((2, 4, 5))
    with pytest.raises(ValueError, match="'dim'"):
        vsa.tile(torch.randn(1, 40, 2, 4, generator=gen), meta, dim=dim)
    with pytest.raises(ValueError, match="'dim'"):
        vsa.untile(torch.randn(1, meta.padded_length, 2, 4, generator=gen), meta, dim=dim)


def test_metadata_first_built_under_inference_mode_serves_training():
    """The metadata is cached: built first by a validation pass under inference_mode, it must
    still serve a training step (inference tensors cannot be saved for backward)."""
    latent = (3, 4, 7)  # a shape no other test builds, so this call builds it
    with torch.inference_mode():
        vsa.build_vsa_metadata(latent, tile_size=(4, 4, 4))
    x = torch.randn(1, math.prod(latent), 2, 8, requires_grad=True)
    vsa.tile(x, vsa.build_vsa_metadata(latent, tile_size=(4, 4, 4))).square().sum().backward()
    assert torch.equal(x.grad, 2 * x.detach())


def test_metadata_first_built_under_a_fake_tensor_mode_serves_eager_calls():
    """Built first inside a fake tensor trace (torch.export, non-strict, of a model that builds
    its tiling in forward), the metadata's tensors are fake ones: cached, they served every later
    eager call for that latent, whose results were fake tensors too."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    latent = (5, 3, 6)  # a shape no other test builds, so this call builds it
    with FakeTensorMode():
        traced = vsa.build_vsa_metadata(latent)
    assert isinstance(traced.variable_block_sizes, FakeTensor)  # what the trace itself gets
    meta = vsa.build_vsa_metadata(latent)
    order, vbs, non_pad = torch_tiling(latent, (4, 4, 4))
    assert torch.equal(meta.tile_partition_indices, order)
    assert torch.equal(meta.variable_block_sizes.long(), vbs)
    assert torch.equal(meta.non_pad_index, non_pad)
