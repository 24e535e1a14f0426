"""Every bad-input class of the op contract through the Python API: the mapped exception
(ValueError / vsa.UnsupportedError / RuntimeError) with the argument named."""

import re

import pytest
import torch

import vsa
from attention_reference import make_problem


def call(p, **kw):
    return vsa.block_sparse_attn(p.q, p.k, p.v, *p.lists, layout=p.layout, **kw)


def test_unsupported_is_a_not_implemented_error():
    assert issubclass(vsa.UnsupportedError, NotImplementedError)


# (description, how to break a valid problem, exception, argument named in the message)
BAD_INPUTS = [
    ("q rank 3", lambda p: p.with_(q=p.q[0]), ValueError, "'q'"),
    ("q rank 5", lambda p: p.with_(q=p.q[None]), ValueError, "'q'"),
    ("head dim 32", lambda p: p.with_(q=p.q[..., :32], k=p.k[..., :32], v=p.v[..., :32]),
     vsa.UnsupportedError, "'q.shape'"),
    ("k head dim differs", lambda p: p.with_(k=torch.cat([p.k, p.k], -1)[..., :128],
                                            v=torch.cat([p.v, p.v], -1)[..., :128]),
     ValueError, "'k.shape'"),
    ("float64 q", lambda p: p.with_(q=p.q.double()), vsa.UnsupportedError, "'q.dtype'"),
    ("int q", lambda p: p.with_(q=p.q.int()), vsa.UnsupportedError, "'q.dtype'"),
    ("k dtype differs", lambda p: p.with_(k=p.k.half()), ValueError, "'k.dtype'"),
    ("v dtype differs", lambda p: p.with_(v=p.v.bfloat16()), ValueError, "'v.dtype'"),
    ("v shape differs", lambda p: p.with_(v=p.v[:, :, :64]), ValueError, "'v.shape'"),
    ("batch differs", lambda p: p.with_(k=torch.cat([p.k, p.k]), v=torch.cat([p.v, p.v])),
     ValueError, "'k.shape'"),
    ("kv heads do not divide", lambda p: p.with_(k=p.k.repeat(1, 3, 1, 1)[:, :3],
                                                 v=p.v.repeat(1, 3, 1, 1)[:, :3]),
     ValueError, "'k.shape'"),
    ("vbs length does not divide Skv", lambda p: p.with_(vbs=torch.full((5,), 32)),
     ValueError, "'variable_block_sizes.shape'"),
    ("block size 96", lambda p: p.with_(vbs=p.vbs[:2]), vsa.UnsupportedError,
     "'variable_block_sizes.shape'"),
    ("Sq not whole blocks", lambda p: p.with_(q=p.q[:, :, :100]), ValueError, "'q.shape'"),
    ("q2k_idx wrong NQ", lambda p: p.with_(q2k_idx=p.q2k_idx[:, :, :1]), ValueError,
     "'q2k_idx.shape'"),
    ("q2k_idx max_kv 0", lambda p: p.with_(q2k_idx=p.q2k_idx[..., :0]), ValueError, "'q2k_idx.shape'"),
    # Tensors with no elements reach the core with a null pointer: named by their extents.
    ("batch 0", lambda p: p.with_(q=p.q[:0], k=p.k[:0], v=p.v[:0], q2k_idx=p.q2k_idx[:0],
                                  q2k_num=p.q2k_num[:0]), ValueError, "'q.shape'"),
    ("Sq 0", lambda p: p.with_(q=p.q[:, :, :0], q2k_idx=p.q2k_idx[:, :, :0], q2k_num=p.q2k_num[:, :, :0]),
     ValueError, "'q.shape'"),
    ("q2k_num wrong shape", lambda p: p.with_(q2k_num=p.q2k_num[..., :1]), ValueError,
     "'q2k_num.shape'"),
    ("q2k_idx rank 3", lambda p: p.with_(q2k_idx=p.q2k_idx[0]), ValueError, "'q2k_idx'"),
    ("float q2k_idx", lambda p: p.with_(q2k_idx=p.q2k_idx.float()), ValueError,
     "'q2k_idx.dtype'"),
    ("bool q2k_num", lambda p: p.with_(q2k_num=p.q2k_num > 0), ValueError, "'q2k_num.dtype'"),
    ("float vbs", lambda p: p.with_(vbs=p.vbs.double()), ValueError,
     "'variable_block_sizes.dtype'"),
    ("index >= NK", lambda p: p.with_(q2k_idx=p.q2k_idx.index_fill(-1, torch.tensor([0]), 3),
                                      q2k_num=p.q2k_num.clamp(min=1)), ValueError, "'q2k_idx'"),
    ("index -1 before the count", lambda p: p.with_(q2k_idx=p.q2k_idx.index_fill(-1, torch.tensor([0]), -1),
                                                    q2k_num=p.q2k_num.clamp(min=1)),
     ValueError, "'q2k_idx'"),
    ("count > max_kv", lambda p: p.with_(q2k_num=p.q2k_num.fill_(4)), ValueError, "'q2k_num'"),
    ("negative count", lambda p: p.with_(q2k_num=p.q2k_num.fill_(-1)), ValueError, "'q2k_num'"),
    ("vbs > blk", lambda p: p.with_(vbs=p.vbs.fill_(65)), ValueError, "'variable_block_sizes'"),
    ("negative vbs", lambda p: p.with_(vbs=p.vbs.fill_(-1)), ValueError, "'variable_block_sizes'"),
    ("empty batch", lambda p: p.with_(q=p.q[:0], k=p.k[:0], v=p.v[:0], q2k_idx=p.q2k_idx[:0],
                                      q2k_num=p.q2k_num[:0]), ValueError, "'q"),
    # A tensor on another device would make torch dispatch the op to that
    # device's kernel (for meta: the fake one, which writes nothing).
    ("vbs on meta", lambda p: p.with_(vbs=p.vbs.to("meta")), ValueError,
     "'variable_block_sizes.device'"),
    ("q2k_num on meta", lambda p: p.with_(q2k_num=p.q2k_num.to("meta")), ValueError,
     "'q2k_num.device'"),
    ("k on meta", lambda p: p.with_(k=p.k.to("meta")), ValueError, "'k.device'"),
]


@pytest.mark.parametrize("make_bad,error,argument", [c[1:] for c in BAD_INPUTS],
                         ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_raises_named_error(gen, make_bad, error, argument):
    p = make_problem(gen, heads=2, nq=2, nk=3)
    with pytest.raises(error) as info:
        call(make_bad(p))
    assert argument in str(info.value), str(info.value)
    assert "expected" in str(info.value) and "got" in str(info.value)


# Unsigned lists wider than int32 (uint32, uint64): a value past int32 named a valid block
# once narrowed (2^32 + j as j), so an out-of-range list ran as another one.
WIDE_UNSIGNED = [
    ("q2k_idx", lambda p, wide: p.with_(q2k_idx=(p.q2k_idx.clamp(min=0).long() + wide).to(torch.uint64),
                                        q2k_num=p.q2k_num.clamp(min=1))),
    ("q2k_num", lambda p, wide: p.with_(q2k_num=(p.q2k_num.long() + wide).to(torch.uint64))),
    ("variable_block_sizes", lambda p, wide: p.with_(vbs=(p.vbs.long() + wide).to(torch.uint64))),
]


@pytest.mark.parametrize("wide", [2**32, 2**31], ids=["2^32", "2^31"])
@pytest.mark.parametrize("argument,make_bad", WIDE_UNSIGNED, ids=[c[0] for c in WIDE_UNSIGNED])
def test_wide_unsigned_metadata_out_of_range(gen, argument, make_bad, wide):
    p = make_bad(make_problem(gen, heads=2, nq=2, nk=3), wide)
    with pytest.raises(ValueError, match=f"'{argument}'"):
        call(p)
    with pytest.raises(ValueError, match=f"'{argument}'"):
        vsa.numpy_forward(*(t.numpy() for t in (p.q, p.k, p.v, *p.lists)))


@pytest.mark.parametrize("layout", ["BHSD", "bsdh", ""])
def test_bad_layout(gen, layout):
    p = make_problem(gen)
    with pytest.raises(ValueError, match="'layout'"):
        vsa.block_sparse_attn(p.q, p.k, p.v, *p.lists, layout=layout)


@pytest.mark.parametrize("scale", [0.0, float("nan"), float("inf")])
def test_bad_scale(gen, scale):
    p = make_problem(gen)
    with pytest.raises(ValueError, match="'scale'"):
        vsa.block_sparse_attn(p.q, p.k, p.v, *p.lists, scale=scale)


def test_backward_error_surfaces(gen):
    # The saved tensors pass the checks in forward; a wrong dout dtype is caught in backward.
    p = make_problem(gen)
    q = p.q.requires_grad_()
    out, _ = vsa.block_sparse_attn(q, p.k, p.v, *p.lists)
    with pytest.raises(ValueError, match="'lse"):
        torch.ops.vsa.backward(out, q, p.k, p.v, out, torch.zeros(3), *p.lists, None, 0.0, "bhsd", False)


def test_bad_block_map(gen):
    with pytest.raises(ValueError, match="'block_map"):
        vsa.map_to_index(torch.ones(1, 2, 3, 4, dtype=torch.float32))


@pytest.mark.parametrize("columns", [2, 4])
def test_block_map_of_another_nk_is_named(gen, columns):
    # map_to_index lists a map's columns whatever their count: a map of fewer than NK columns
    # never listed the last blocks and ran silently; one of more named q2k_idx, never passed.
    import vsa.compat.fastvideo_kernel as fk
    p = make_problem(gen, heads=2, nq=2, nk=3)
    block_map = torch.rand(1, 2, 2, columns, generator=gen) > 0.5
    with pytest.raises(ValueError, match=r"'block_map\.shape'.*NK = 3"):
        vsa.block_sparse_attn_from_mask(p.q, p.k, p.v, block_map, p.vbs)
    with pytest.raises(ValueError, match=r"'block_map\.shape'.*NK = 3"):
        fk.block_sparse_attn(p.q, p.k, p.v, block_map[0], p.vbs)


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("axis", [0, 1, 2], ids=["batch", "heads", "query blocks"])
def test_block_map_of_another_batch_heads_or_query_blocks_is_named(gen, layout, axis):
    # Such a map was named 'q2k_idx.shape', the lists map_to_index made of it, which the caller
    # never passed; the compat map [H, NQ, NK] was named by its batch-broadcast 4-D view.
    import vsa.compat.fastvideo_kernel as fk
    p = make_problem(gen, batch=2, heads=2, kv_heads=1, nq=2, nk=3, layout=layout)
    shape = [2, 2, 2, 3]
    shape[axis] += 1
    block_map = torch.rand(shape, generator=gen) > 0.5
    with pytest.raises(ValueError, match=rf"'block_map\.shape': expected \[B, H, NQ, NK\] = \[2, 2, 2, 3\] "
                                         rf".*got {re.escape(str(shape))}$"):
        vsa.block_sparse_attn_from_mask(p.q, p.k, p.v, block_map, p.vbs, layout=layout)
    if layout == "bhsd":  # FastVideo's block_sparse_attn takes bhsd tensors only
        for caller_map in (block_map, block_map[0])[:1 if axis == 0 else 2]:  # block_map[0] fits at axis 0
            got = re.escape(str(list(caller_map.shape)))
            with pytest.raises(ValueError, match=r"'block_map\.shape': expected \[B, H, NQ, NK\] = \[2, 2, 2, 3\] "
                                                 rf"or \[H, NQ, NK\] = \[2, 2, 3\].*got {got}$"):
                fk.block_sparse_attn(p.q, p.k, p.v, caller_map, p.vbs)
