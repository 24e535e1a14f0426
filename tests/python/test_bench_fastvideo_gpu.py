"""FastVideo's kernels through the benchmark's adapters against vsa's float64 reference: forward
(output and lse), backward, and its layer. Runs on a GPU with the peer kit importable
(PYTHONPATH=$PWD/.peers/fv_py, see shared/peers/README.md); skipped elsewhere. A kit that is
present but fails to build fails these tests rather than skipping them."""

import importlib.util

import pytest
import torch
from attention_reference import reference_attention, rel_error
from bench_problems import DIM, cropped_wan

from vsa.bench import fastvideo
from vsa.bench.inputs import zero_pad_tokens
from vsa.bench.layer_reference import reference_layer, reference_layer_blocks
from vsa.bench.problem import LayerProblem
from vsa.bench.reference import relative_error

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(importlib.util.find_spec("fastvideo_kernel") is None,
                       reason="fastvideo_kernel not on the path (PYTHONPATH=$PWD/.peers/fv_py)"),
]

TOPK = 12
KINDS = ["tk", "triton"]


def _tk_or_skip(kind):
    if kind == "tk" and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the ThunderKittens kernel is built for sm_90 only")
    return kind == "tk"


@pytest.mark.parametrize("kind", KINDS)
def test_forward_and_lse_match_reference(gen, kind):
    tk = _tk_or_skip(kind)
    p, _ = cropped_wan(gen, TOPK)
    op = fastvideo.attention_op(tk)
    out, lse = op(*p.example, *fastvideo.int32_lists(p.q2k_idx, p.q2k_num,
                                                     p.variable_block_sizes))
    _check_forward(p, out, lse, tk)


@pytest.mark.parametrize("kind", KINDS)
def test_128_token_blocks_run_as_64_token_halves(gen, kind):
    """What the benchmark times for 128-token cases: the 64-token kernel on the expanded lists
    (blocks with fewer than 64 tokens among them), the same attention as the 128-token lists."""
    tk = _tk_or_skip(kind)
    p, _ = cropped_wan(gen, 8, block=128)
    assert (p.variable_block_sizes < 64).any()
    lists = fastvideo.lists_as_64_token_blocks(p.q2k_idx, p.q2k_num, p.variable_block_sizes)
    out, lse = fastvideo.attention_op(tk)(*p.example, *fastvideo.int32_lists(*lists))
    _check_forward(p, out, lse, tk)


def _check_forward(p, out, lse, tk):
    lse2 = fastvideo.tk_lse_base2(lse, DIM) if tk else lse
    ref_out, ref_lse = reference_attention(*p.example, p.q2k_idx, p.q2k_num,
                                           p.variable_block_sizes)
    assert rel_error(out, ref_out) <= 1e-2
    assert lse2.shape == ref_lse.shape
    assert (lse2.double() - ref_lse).abs().max() <= 2e-2


@pytest.mark.parametrize("block", [64, 128])
@pytest.mark.parametrize("kind", KINDS)
def test_backward_through_the_peer_matches_reference(gen, kind, block):
    _tk_or_skip(kind)
    p, _ = cropped_wan(gen, TOPK if block == 64 else 8, block)
    runner = (fastvideo.tk_attention if kind == "tk" else fastvideo.triton_attention)(p)
    leaves = [t.detach().requires_grad_() for t in p.example]
    grad_out = torch.randn_like(p.example[0])
    grads = torch.autograd.grad(runner(*leaves), leaves, grad_out)
    exact = [t.detach().double().requires_grad_() for t in p.example]
    ref_out, _ = reference_attention(*exact, p.q2k_idx, p.q2k_num, p.variable_block_sizes)
    ref_grads = torch.autograd.grad(ref_out, exact, grad_out.double())
    for name, got, ref in zip("qkv", grads, ref_grads):
        assert got.dtype == torch.bfloat16, name
        assert rel_error(got, ref) <= 2e-2, name


@pytest.mark.parametrize("kind", KINDS)
def test_layer_matches_reference_when_every_block_is_kept(gen, kind):
    """With top-k = every block the selection cannot depend on FastVideo's bf16 scores, so its
    layer must match the float64 layer: this checks the tile-side block_size and the fine-stage
    switch of the adapter."""
    tk = _tk_or_skip(kind)
    p, non_pad = cropped_wan(gen, TOPK)
    vbs, heads = p.variable_block_sizes, p.example[0].shape[1]
    nk = vbs.numel()
    inputs = zero_pad_tokens(p.example, non_pad)
    ref = reference_layer(*inputs, vbs, 64, nk)
    layer = LayerProblem(inputs, 64, vbs, nk, ref.q2k_idx, ref.q2k_num)
    out = (fastvideo.tk_layer if tk else fastvideo.triton_layer)(layer)(*inputs)
    samples = [(0, h, i) for h in range(heads) for i in range(nk)]
    expected = reference_layer_blocks(*inputs, vbs, ref, samples)
    assert relative_error(out, expected, samples) <= 1e-2
