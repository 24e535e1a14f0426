"""vsa bench's GPU-only pieces that need no FastVideo: FlexAttention's backward on 64-token blocks
(torch < 2.14 has no backward config for them by itself), the torch layer peer, the static checks
of the FastVideo adapters, and the stage split read from real CUDA kernel names."""

import re

import pytest
import torch
from attention_reference import reference_attention, rel_error
from bench_problems import cropped_wan

import vsa
from vsa.bench import fastvideo
from vsa.bench.inputs import zero_pad_tokens
from vsa.bench.layer_peers import torch_flex
from vsa.bench.layer_reference import reference_layer, reference_layer_blocks
from vsa.bench.measure import training_calls
from vsa.bench.peers import flex
from vsa.bench.problem import LayerProblem
from vsa.bench.reference import relative_error
from vsa.bench.stages import profile_stages

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

def test_flex_forward_and_backward_on_64_token_blocks(gen):
    torch.compiler.reset()
    p, _ = cropped_wan(gen, topk=12)
    runner = flex(p)
    leaves = [t.detach().requires_grad_() for t in p.example]
    out = runner(*leaves)
    grad_out = torch.randn_like(out)
    grads = torch.autograd.grad(out, leaves, grad_out)  # NoValidChoicesError on 2.11 unfitted
    exact = [t.detach().double().requires_grad_() for t in p.example]
    ref_out, _ = reference_attention(*exact, p.q2k_idx, p.q2k_num, p.variable_block_sizes)
    ref_grads = torch.autograd.grad(ref_out, exact, grad_out.double())
    assert rel_error(out, ref_out) <= 1e-2
    for name, got, ref in zip("qkv", grads, ref_grads):
        assert rel_error(got, ref) <= 2e-2, name


def test_torch_flex_layer_matches_reference_and_trains(gen):
    """Top-k = every block, so the bf16 coarse scores cannot change the selection."""
    torch.compiler.reset()
    p, non_pad = cropped_wan(gen, topk=1)
    vbs, heads = p.variable_block_sizes, p.example[0].shape[1]
    nk = vbs.numel()
    inputs = zero_pad_tokens(p.example, non_pad)
    ref = reference_layer(*inputs, vbs, 64, nk)
    runner = torch_flex(LayerProblem(inputs, 64, vbs, nk, ref.q2k_idx, ref.q2k_num))
    samples = [(0, h, i) for h in range(heads) for i in range(nk)]
    with torch.no_grad():
        out = runner(*inputs)
    expected = reference_layer_blocks(*inputs, vbs, ref, samples)
    assert relative_error(out, expected, samples) <= 1e-2
    for step in training_calls(runner, [inputs, inputs]):  # a new BlockMask each call
        dq, dk, dv = step()
        assert all(torch.isfinite(g).all() for g in (dq, dk, dv))


def test_fastvideo_static_checks():
    q = torch.zeros(1, 4, 128, 128, device="cuda", dtype=torch.bfloat16)
    assert fastvideo.unsupported(q, q, 128) is None  # as two 64-token halves
    assert fastvideo.unsupported(q, q, 128, fastvideo.LAYER_BLOCKS) == "64-token blocks only"
    assert fastvideo.unsupported(q, q, 256) == "64- or 128-token blocks only"
    assert fastvideo.unsupported(q.half(), q.half(), 64) == "bf16 only"
    assert fastvideo.unsupported(q, q[:, :2], 64) == "equal query and key/value heads only (no GQA)"
    assert fastvideo.unsupported(q, q, 64) is None
    if torch.cuda.get_device_capability() == (9, 0):
        two = torch.cat([q, q])
        assert fastvideo.tk_unsupported(two, two, 64) == \
            "the ThunderKittens kernel runs batch 1 only"
        assert fastvideo.tk_unsupported(q, q, 64) is None


def test_stage_split_reads_cuda_kernel_names(gen):
    p, _ = cropped_wan(gen, topk=12)
    bias = torch.randn_like(p.example[0])

    def fine_then_combine():
        out, _ = vsa.block_sparse_attn(*p.example, p.q2k_idx, p.q2k_num, p.variable_block_sizes,
                                       need_lse=False)
        return out + bias

    with torch.no_grad():
        fine_then_combine()
        times = profile_stages(fine_then_combine, p.device, calls=2)
    assert times.source == "CUDA kernels"
    fine = [k for k in times.kernels if k["stage"] == "fine"]
    # vsa's forward kernels, whichever the kernel choice ran (v2 is fwd_tma_kernel on an H200)
    assert fine and all(re.search(r"vsa::cuda::sm\d+::fwd\w*_kernel<", k["name"]) for k in fine), times.kernels
    assert times.kernels[-1]["stage"] == "combine"  # the add after the fine stage
    assert times.ms["fine"] > times.ms["combine"] > 0
    # Only kernels count: the profiled call's own range (a GPU user annotation on torch 2.11,
    # which once showed up as a 'coarse' kernel as long as the whole call) is not one.
    assert times.ms["coarse"] == 0 and times.total_ms < 1.5 * sum(k["ms"] for k in fine), times.kernels
