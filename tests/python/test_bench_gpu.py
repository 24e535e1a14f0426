"""vsa bench's GPU-only pieces that need no FastVideo: FlexAttention's backward on 64-token blocks
(torch < 2.14 has no backward config for them by itself) and the static checks of the FastVideo
adapters."""

import pytest
import torch
from attention_reference import reference_attention, rel_error
from bench_problems import cropped_wan

from vsa.bench import fastvideo
from vsa.bench.peers import flex

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


def test_fastvideo_static_checks():
    q = torch.zeros(1, 4, 128, 128, device="cuda", dtype=torch.bfloat16)
    assert fastvideo.unsupported(q, q, 128) == "64-token blocks only"
    assert fastvideo.unsupported(q.half(), q.half(), 64) == "bf16 only"
    assert fastvideo.unsupported(q, q[:, :2], 64) == "equal query and key/value heads only (no GQA)"
    assert fastvideo.unsupported(q, q, 64) is None
    if torch.cuda.get_device_capability() == (9, 0):
        two = torch.cat([q, q])
        assert fastvideo.tk_unsupported(two, two, 64) == \
            "the ThunderKittens kernel runs batch 1 only"
        assert fastvideo.tk_unsupported(q, q, 64) is None
