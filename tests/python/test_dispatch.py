"""VSA_BACKEND: the one backend switch of the Python layer."""

import pytest
import torch

import vsa
from attention_reference import make_problem


@pytest.mark.parametrize("value,device,backend", [
    (None, "cpu", "cpu"), ("auto", "cpu", "cpu"), ("CPU", "cpu", "cpu"), (" cpu ", "cpu", "cpu"),
    ("", "cpu", "cpu"), ("cpu", "cuda", "cpu"), ("auto", "cuda", "cuda"), ("cuda", "cuda", "cuda"),
])
def test_select_backend(monkeypatch, value, device, backend):
    if value is not None:
        monkeypatch.setenv("VSA_BACKEND", value)
    assert vsa.select_backend(torch.device(device)) == backend


def test_unknown_backend_is_an_error(monkeypatch, gen):
    monkeypatch.setenv("VSA_BACKEND", "triton")
    p = make_problem(gen)
    with pytest.raises(ValueError, match="'VSA_BACKEND'"):
        vsa.block_sparse_attn(p.q, p.k, p.v, *p.lists)
    assert "'VSA_BACKEND'" in vsa.is_supported(p.q, p.k, p.v, p.vbs).reason


def test_cuda_backend_refuses_cpu_tensors(monkeypatch, gen):
    monkeypatch.setenv("VSA_BACKEND", "cuda")
    p = make_problem(gen)
    with pytest.raises(ValueError, match="'VSA_BACKEND'"):
        vsa.block_sparse_attn(p.q, p.k, p.v, *p.lists)


def test_cpu_backend_on_cpu_tensors_is_the_default_path(monkeypatch, gen):
    p = make_problem(gen)
    default = vsa.block_sparse_attn(p.q, p.k, p.v, *p.lists)
    monkeypatch.setenv("VSA_BACKEND", "cpu")
    forced = vsa.block_sparse_attn(p.q, p.k, p.v, *p.lists)
    assert all(torch.equal(a, b) for a, b in zip(default, forced))
