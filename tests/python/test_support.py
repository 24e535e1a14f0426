"""vsa.is_supported: static facts only — it never reads tensor data."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import vsa
from attention_reference import make_problem


def test_supported_problem(gen):
    p = make_problem(gen, heads=4, kv_heads=2, layout="bshd")
    support = vsa.is_supported(p.q, p.k, p.v, p.vbs, p.q2k_idx, p.q2k_num, layout="bshd")
    assert support and support.ok and support.reason == ""
    assert vsa.is_supported(p.q, p.k, p.v, p.vbs, layout="bshd")  # lists implied


@pytest.mark.parametrize("change,reason", [
    (lambda p: p.with_(q=p.q.double(), k=p.k.double(), v=p.v.double()), "'q.dtype'"),
    (lambda p: p.with_(q=p.q[..., :32], k=p.k[..., :32], v=p.v[..., :32]), "'q.shape'"),
    (lambda p: p.with_(vbs=p.vbs[:2]), "'variable_block_sizes.shape'"),
    (lambda p: p.with_(q2k_idx=p.q2k_idx[:, :1]), "'q2k_idx.shape'"),
    (lambda p: p.with_(q2k_num=p.q2k_num.float()), "'q2k_num.dtype'"),
])
def test_unsupported_problem_says_why(gen, change, reason):
    p = change(make_problem(gen))
    support = vsa.is_supported(p.q, p.k, p.v, p.vbs, p.q2k_idx, p.q2k_num)
    assert not support and reason in support.reason


@pytest.mark.parametrize("name", ["k", "v", "vbs", "q2k_idx", "q2k_num"])
def test_a_tensor_on_another_device_is_unsupported_as_the_op_refuses_it(gen, name):
    p = make_problem(gen)
    p = p.with_(**{name: getattr(p, name).to("meta")})
    support = vsa.is_supported(p.q, p.k, p.v, p.vbs, p.q2k_idx, p.q2k_num)
    argument = "variable_block_sizes" if name == "vbs" else name
    assert not support and f"'{argument}.device'" in support.reason
    with pytest.raises(ValueError, match=f"'{argument}.device'"):
        vsa.block_sparse_attn(p.q, p.k, p.v, *p.lists)


def test_bad_layout_and_scale_are_reported_not_raised(gen):
    p = make_problem(gen)
    assert "'layout'" in vsa.is_supported(p.q, p.k, p.v, p.vbs, layout="sbhd").reason
    assert "'scale'" in vsa.is_supported(p.q, p.k, p.v, p.vbs, scale=0.0).reason


def test_agrees_with_the_op_on_strides(gen):
    # A D stride != 1 is supported: the op copies such tensors.
    p = make_problem(gen)
    q = p.q.transpose(-1, -2).contiguous().transpose(-1, -2)
    assert vsa.is_supported(q, p.k, p.v, p.vbs, p.q2k_idx, p.q2k_num)
    vsa.block_sparse_attn(q, p.k, p.v, *p.lists)


def test_reads_no_data(gen, monkeypatch):
    """Garbage contents (NaN data, out-of-range lists) do not change the answer, and no
    data accessor is touched."""
    p = make_problem(gen)
    for t in (p.q, p.k, p.v):
        t.fill_(float("nan"))
    p.q2k_idx.fill_(99)
    p.q2k_num.fill_(-5)
    p.vbs.fill_(1000)

    def forbidden(*args, **kwargs):
        raise AssertionError("is_supported read tensor data")

    for name in ("item", "tolist", "numpy", "__array__", "__bool__", "__dlpack__", "cpu"):
        monkeypatch.setattr(torch.Tensor, name, forbidden)
    assert vsa.is_supported(p.q, p.k, p.v, p.vbs, p.q2k_idx, p.q2k_num)
    monkeypatch.undo()
    with pytest.raises(ValueError):  # the op itself does read the lists on the CPU backend
        vsa.block_sparse_attn(p.q, p.k, p.v, *p.lists)


def test_works_on_fake_tensors():
    """Fake tensors have no storage at all: answering for them proves no data is read
    (and lets is_supported run while torch.compile traces)."""
    with FakeTensorMode():
        q = torch.empty(1, 2, 128, 64, dtype=torch.bfloat16)
        kv = torch.empty(1, 2, 192, 64, dtype=torch.bfloat16)
        vbs = torch.empty(3, dtype=torch.int32)
        assert vsa.is_supported(q, kv, kv, vbs)
        assert not vsa.is_supported(q, kv, kv, vbs[:2])


def test_meta_device_is_not_supported():
    q = torch.empty(1, 2, 128, 64, device="meta")
    support = vsa.is_supported(q, q, q, torch.empty(2, dtype=torch.int32, device="meta"))
    assert not support and "'q.device'" in support.reason
