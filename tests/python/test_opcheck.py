"""torch.library.opcheck on every vsa custom op: CPU here (CI), CUDA where a GPU is (gpu-marked).

opcheck checks an op's schema, its fake (meta) kernel against the real one,
its autograd registration, and runs it through AOT dispatch with dynamic
shapes (gradients included where inputs require them). SAMPLES holds inputs
for each op; test_every_vsa_op_has_samples fails, naming the op, when one is
registered without them, so a new op is never left unchecked.
"""

import pytest
import torch

import vsa
from attention_reference import make_problem
from layer_reference import draw_layer_problem

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def registered_vsa_ops():
    return sorted(name.split("::", 1)[1] for name in torch._C._dispatch_get_all_op_names()
                  if name.startswith("vsa::"))


def _problems(gen, device):
    """Small problems across the contract: GQA, both layouts, int32/int64 lists,
    duplicates, empty rows, partial blocks (make_problem draws vbs in [0, blk])."""
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    specs = [
        dict(heads=4, kv_heads=2, nq=2, nk=3, layout="bhsd"),
        dict(heads=2, nq=3, nk=2, layout="bshd", index_dtype=torch.int64, duplicates=True, max_kv=3),
        dict(batch=2, heads=1, nq=1, nk=2, block=128, dim=128, layout="bhsd"),
    ]
    for spec in specs:
        p = make_problem(gen, dtype=dtype, **spec)
        yield p.with_(**{name: getattr(p, name).to(device)
                         for name in ("q", "k", "v", "q2k_idx", "q2k_num", "vbs")})


def _q_vbs(gen, p, n):
    """q_variable_block_sizes for every other problem (None for the rest): random in
    [0, blk], the dtype of the lists."""
    if n % 2 == 0:
        return None
    nq, block = p.q2k_num.shape[-1], p.k.shape[2 if p.layout == "bhsd" else 1] // p.vbs.numel()
    return torch.randint(0, block + 1, (nq,), generator=gen).to(device=p.q.device, dtype=p.vbs.dtype)


def forward_samples(gen, device):
    for n, p in enumerate(_problems(gen, device)):
        scale = 0.0 if n % 2 == 0 else 0.2
        q = p.q.clone().requires_grad_()
        q_vbs = _q_vbs(gen, p, n)
        yield (q, p.k, p.v, *p.lists, q_vbs, scale, True, p.layout, n % 2 == 1)
        yield (p.q, p.k, p.v, *p.lists, q_vbs, scale, False, p.layout, False)  # need_lse False: no gradient


def backward_samples(gen, device):
    for n, p in enumerate(_problems(gen, device)):
        q_vbs = _q_vbs(gen, p, n)
        out, lse = torch.ops.vsa.forward(p.q, p.k, p.v, *p.lists, q_vbs, 0.0, True, p.layout, False)
        yield (torch.randn(out.shape, generator=gen).to(out), p.q, p.k, p.v, out, lse, *p.lists, q_vbs, 0.0,
               p.layout, n % 2 == 1)  # both ways of computing dq


def map_to_index_samples(gen, device):
    for shape in ((1, 2, 3, 4), (2, 1, 2, 40)):
        yield ((torch.rand(shape, generator=gen) > 0.5).to(device),)


def invert_indices_samples(gen, device):
    for p in _problems(gen, device):
        nk = p.vbs.numel()
        longest = max(1, _longest_inverted_list(p.q2k_idx.cpu(), p.q2k_num.cpu(), nk))
        yield (p.q2k_idx, p.q2k_num, nk, longest)


def _longest_inverted_list(q2k_idx, q2k_num, nk):
    """The capacity invert_indices needs: the most times one (b, h) lists one KV block."""
    listed = torch.arange(q2k_idx.shape[-1]) < q2k_num[..., None].long()
    ids = torch.where(listed, q2k_idx.long(), nk)
    counts = torch.zeros(q2k_idx.shape[0], q2k_idx.shape[1], nk + 1, dtype=torch.int64)
    counts.scatter_add_(2, ids.flatten(2), torch.ones_like(ids.flatten(2)))
    return int(counts[..., :nk].max())


def topk_to_index_samples(gen, device):
    for k in (1, 4):
        yield (torch.stack([torch.randperm(6, generator=gen)[:k] for _ in range(6)]).reshape(1, 2, 3, k)
               .to(device),)


def pack_varlen_index_samples(gen, device):
    # Videos of (query, KV) blocks (2, 3), (0, 1), (3, 2); ids local to each video.
    q_blocks, kv_blocks = torch.tensor([2, 0, 3]), torch.tensor([3, 1, 2])
    cu_q, cu_kv = (torch.cat([torch.zeros(1, dtype=torch.int64), n.cumsum(0)]) for n in (q_blocks, kv_blocks))
    kv_of_row = kv_blocks.repeat_interleave(q_blocks)  # KV blocks of each query block's video
    for dtype in (torch.int32, torch.int64):
        idx = (torch.rand(2, 2, 5, 3, generator=gen) * kv_of_row[:, None]).long()
        num = torch.randint(0, 4, (2, 2, 5), generator=gen)
        yield tuple(t.to(device=device, dtype=dtype) for t in (idx, num, cu_q, cu_kv))


def _layer_problems(gen, device):
    """Layer inputs on `device`: GQA, both layouts, a gate or none."""
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    for case in (dict(heads=2, kv_heads=1, nq=2, nk=3), dict(heads=2, nq=3, nk=4, layout="bshd", gated=False)):
        yield draw_layer_problem(gen, dtype=dtype, **case).to(device)


def block_mean_samples(gen, device):
    for p in _layer_problems(gen, device):
        yield (p.q.clone().requires_grad_(), p.q_vbs, p.layout)


def block_means_samples(gen, device):
    for p in _layer_problems(gen, device):
        yield (*(t.clone().requires_grad_() for t in (p.q, p.k, p.v)), p.q_vbs, p.vbs, p.layout)


def block_mean_backward_samples(gen, device):
    for p in _layer_problems(gen, device):
        mean = torch.ops.vsa.block_mean(p.q, p.q_vbs, p.layout)
        yield (torch.randn(mean.shape, generator=gen).to(mean), p.q_vbs, list(p.q.shape), p.q.dtype, p.layout)


def coarse_stage_samples(gen, device):
    for p in _layer_problems(gen, device):
        means = [torch.ops.vsa.block_mean(t, vbs, p.layout) for t, vbs in ((p.q, p.q_vbs), (p.k, p.vbs), (p.v, p.vbs))]
        yield (*[m.requires_grad_() for m in means], p.vbs, p.topk, 0.0)


def coarse_stage_backward_samples(gen, device):
    for p in _layer_problems(gen, device):
        means = [torch.ops.vsa.block_mean(t, vbs, p.layout) for t, vbs in ((p.q, p.q_vbs), (p.k, p.vbs), (p.v, p.vbs))]
        coarse = torch.ops.vsa.coarse_stage(*means, p.vbs, p.topk, 0.0)[0]
        yield (*means, p.vbs, coarse, torch.randn(coarse.shape, generator=gen).to(coarse), 0.0)


def _coarse_of(p):
    heads = p.q.shape[1] if p.layout == "bhsd" else p.q.shape[2]
    return torch.randn(p.q.shape[0], heads, len(p.q_vbs), p.q.shape[-1], device=p.q.device)


def gate_combine_samples(gen, device):
    for p in _layer_problems(gen, device):
        yield (p.q.clone().requires_grad_(), _coarse_of(p).requires_grad_(), p.gate, p.layout)


def gate_combine_backward_samples(gen, device):
    for p in _layer_problems(gen, device):
        yield (torch.randn(p.q.shape, generator=gen).to(p.q), _coarse_of(p), p.gate, p.layout)


def fine_stage_gated_samples(gen, device):
    for n, p in enumerate(_layer_problems(gen, device)):
        means = [torch.ops.vsa.block_mean(t, vbs, p.layout) for t, vbs in ((p.q, p.q_vbs), (p.k, p.vbs), (p.v, p.vbs))]
        coarse, q2k_idx, q2k_num = torch.ops.vsa.coarse_stage(*means, p.vbs, p.topk, 0.0)
        q_vbs = p.q_vbs if n % 2 == 0 else None  # the layer's padding rows, or every row real
        yield (p.q, p.k, p.v, q2k_idx, q2k_num, p.vbs, q_vbs, coarse, p.gate, 0.0, p.layout)


SAMPLES = {
    "forward": forward_samples,
    "backward": backward_samples,
    "map_to_index": map_to_index_samples,
    "invert_indices": invert_indices_samples,
    "topk_to_index": topk_to_index_samples,
    "pack_varlen_index": pack_varlen_index_samples,
    "block_mean": block_mean_samples,
    "block_means": block_means_samples,
    "block_mean_backward": block_mean_backward_samples,
    "coarse_stage": coarse_stage_samples,
    "coarse_stage_backward": coarse_stage_backward_samples,
    "gate_combine": gate_combine_samples,
    "gate_combine_backward": gate_combine_backward_samples,
    "fine_stage_gated": fine_stage_gated_samples,
    "fine_stage_gated_training": fine_stage_gated_samples,  # the same arguments
}


def test_every_vsa_op_has_samples():
    registered = set(registered_vsa_ops())
    missing = sorted(registered - set(SAMPLES))
    assert not missing, f"vsa ops without opcheck samples (add them to SAMPLES in {__file__}): {missing}"
    assert set(SAMPLES) <= registered, f"SAMPLES names ops that do not exist: {sorted(set(SAMPLES) - registered)}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_opcheck(name, device, gen):
    op = getattr(torch.ops.vsa, name).default
    # bf16 gradients on CUDA may be summed in any order; fp32 on the CPU is exact run to run.
    tolerances = {} if device == "cpu" else dict(atol=2e-2, rtol=2e-2)
    checked = 0
    for args in SAMPLES[name](gen, device):
        torch.library.opcheck(op, args, **tolerances)
        checked += 1
    assert checked > 0
