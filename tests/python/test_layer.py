"""vsa.video_sparse_attn (coarse + top-k fine + gate) against a float64 reference layer
(dense coarse attention over block means + masked fine attention), on the CPU backend:
outputs, block lists and gradients of q, k, v and gate; ties, empty KV blocks, top-k of 1
and NK, GQA, both layouts, 64- and 128-token blocks; the stage functions; bad arguments.
The tie and empty-block cases also run on CUDA where there is a GPU (test_cuda_layer.py
has the rest of the CUDA tests)."""

import pytest
import torch

import vsa
from vsa.layer import block_means, coarse_stage, fine_stage, fine_stage_gated, gate_combine
from attention_reference import rel_error
from layer_reference import (draw_clear_problem, draw_layer_problem, reference_layer,
                             reference_means)

CASES = [
    dict(),
    dict(heads=4, kv_heads=2, topk=3, layout="bshd"),
    dict(heads=3, kv_heads=1, nq=2, nk=6, topk=4, dim=128),
    dict(block=128, nq=2, nk=4, topk=2, layout="bshd"),
    dict(batch=2, topk=1, gated=False),
    dict(nk=4, topk=4),  # top-k = NK: every live block
]


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=[
    pytest.mark.gpu, pytest.mark.skipif(not vsa.cuda_compiled(), reason="built without CUDA kernels")])])
def device(request):
    """The edge cases run on every backend (the CUDA one only where there is a GPU)."""
    return request.param


def case_id(case):
    return ",".join(f"{k}={v}" for k, v in case.items()) or "default"


def layer(p, **kwargs):
    return vsa.video_sparse_attn(*p.inputs(), p.block, p.gate, layout=p.layout, **kwargs)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_forward_and_lists_match_reference(gen, case):
    p = draw_clear_problem(gen, **case)
    out, q2k_idx, q2k_num = layer(p, return_lists=True)
    want, want_idx, want_num, _ = reference_layer(*p.inputs(), p.gate, block=p.block, layout=p.layout)
    assert out.shape == p.q.shape and out.dtype == p.q.dtype
    assert q2k_idx.dtype == q2k_num.dtype == torch.int32
    assert torch.equal(q2k_idx.long(), want_idx) and torch.equal(q2k_num.long(), want_num)
    assert rel_error(out, want) <= 1e-5


@pytest.mark.parametrize("training", [False, True])
def test_scale_serves_the_coarse_and_the_fine_stage(gen, training):
    # A scale far from 1/sqrt(D), on the inference path and on the training path (which run
    # different ops): forcing the default scale on either passed every test before this one.
    p = draw_clear_problem(gen, heads=2, nq=3, nk=5, topk=2)
    q = p.q.clone().requires_grad_(training)
    out = vsa.video_sparse_attn(q, p.k, p.v, p.vbs, p.q_vbs, p.topk, p.block, p.gate, scale=0.9,
                                layout=p.layout)
    want, *_ = reference_layer(*p.inputs(), p.gate, block=p.block, scale=0.9, layout=p.layout)
    default, *_ = reference_layer(*p.inputs(), p.gate, block=p.block, layout=p.layout)
    assert rel_error(out.detach(), want) <= 1e-5
    assert rel_error(default, want) > 1e-2  # the scale changes the answer, so the check can fail


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_gradients_match_reference(gen, case):
    p = draw_clear_problem(gen, **case)
    names = ["q", "k", "v"] + (["gate"] if p.gate is not None else [])
    leaves = {n: getattr(p, n).clone().requires_grad_() for n in names}
    ref_leaves = {n: getattr(p, n).double().requires_grad_() for n in names}
    dout = torch.randn(p.q.shape, generator=gen)

    out = vsa.video_sparse_attn(leaves["q"], leaves["k"], leaves["v"], p.vbs, p.q_vbs, p.topk,
                                p.block, leaves.get("gate"), layout=p.layout)
    out.backward(dout)
    want, *_ = reference_layer(ref_leaves["q"], ref_leaves["k"], ref_leaves["v"], p.vbs, p.q_vbs,
                               p.topk, ref_leaves.get("gate"), block=p.block, layout=p.layout)
    want.backward(dout.double())
    for n in names:
        assert rel_error(leaves[n].grad, ref_leaves[n].grad) <= 1e-4, n


def test_gradients_with_the_lists_returned_and_an_undefined_output_gradient(gen):
    """The lists are not differentiable: returning them changes no gradient. An undefined
    gradient of out (as gradcheck sends it) gives no gradient of q, k, v or the gate."""
    p = draw_clear_problem(gen)
    leaves = [t.clone().requires_grad_() for t in (p.q, p.k, p.v, p.gate)]
    dout = torch.randn(p.q.shape, generator=gen)
    grads = []
    for return_lists in (False, True):
        result = vsa.video_sparse_attn(*leaves[:3], p.vbs, p.q_vbs, p.topk, p.block, leaves[3],
                                       layout=p.layout, return_lists=return_lists)
        out = result[0] if return_lists else result
        grads.append(torch.autograd.grad(out, leaves, dout))
    for with_lists, without in zip(*grads):
        assert torch.equal(with_lists, without)
    out = vsa.video_sparse_attn(*leaves[:3], p.vbs, p.q_vbs, p.topk, p.block, leaves[3], layout=p.layout)
    undefined = torch._C._functions.UndefinedGrad()(out)
    assert torch.autograd.grad(undefined, leaves, dout, allow_unused=True) == (None,) * 4


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16bit_inputs_match_reference(gen, dtype):
    p = draw_clear_problem(gen, heads=2, nk=6, topk=3, dtype=dtype, layout="bshd")
    out, q2k_idx, _ = layer(p, return_lists=True)
    want, want_idx, *_ = reference_layer(*p.inputs(), p.gate, block=p.block, layout=p.layout)
    assert out.dtype == dtype
    assert torch.equal(q2k_idx.long(), want_idx)
    assert rel_error(out, want) <= 1e-2


def test_ties_go_to_the_lower_block_id(gen, device):
    """Every KV block holds the same tokens (block 3 twice them), so all scores tie
    bit for bit except block 3's."""
    p = draw_layer_problem(gen, nq=2, nk=6, topk=3, vbs=[64, 64, 0, 64, 64, 64], dtype=torch.bfloat16)
    k = p.k[:, :, :64].repeat(1, 1, 6, 1)
    k[:, :, 192:256] *= 2
    q = p.q.abs()  # positive means against positive keys: block 3 scores highest
    k = k.abs()
    _, q2k_idx, q2k_num = vsa.video_sparse_attn(*(t.to(device) for t in (q, k, p.v, p.vbs, p.q_vbs)), 3,
                                                return_lists=True)
    assert q2k_idx.tolist() == [[[[0, 1, 3]] * 2] * 2]
    assert q2k_num.tolist() == [[[3, 3]] * 2]


def test_every_kv_block_empty_gives_zero(gen, device):
    p = draw_layer_problem(gen, vbs=[0] * 5, topk=2, dtype=torch.bfloat16).to(device)
    leaves = [t.clone().requires_grad_() for t in (p.q, p.k, p.v, p.gate)]
    out, q2k_idx, q2k_num = vsa.video_sparse_attn(*leaves[:3], p.vbs, p.q_vbs, 2, gate=leaves[3],
                                                  return_lists=True)
    assert torch.all(out == 0) and torch.all(q2k_num == 0) and torch.all(q2k_idx == -1)
    out.backward(torch.randn(out.shape, generator=gen).to(out))
    for leaf in leaves:
        assert torch.all(leaf.grad == 0)


def test_topk_of_nk_lists_only_live_blocks(gen, device):
    p = draw_layer_problem(gen, nk=5, topk=5, vbs=[64, 0, 3, 0, 64], dtype=torch.bfloat16).to(device)
    _, q2k_idx, q2k_num = layer(p, return_lists=True)
    assert torch.all(q2k_num == 3)
    assert q2k_idx[0, 0, 0].tolist() == [0, 2, 4, -1, -1]


FUSION_CASES = [
    dict(dtype=torch.bfloat16),
    dict(dtype=torch.float16, heads=4, kv_heads=2, layout="bshd", gated=False),
    dict(dtype=torch.bfloat16, block=128, nq=2, nk=4, dim=128, layout="bshd"),
    dict(dtype=torch.float16, heads=3, kv_heads=1, nk=6, topk=4, gated=False, dim=128),
    dict(dtype=torch.float32, batch=2, topk=3),
]


def _fusion_id(case):
    return case_id({k: str(v).replace("torch.", "") for k, v in case.items()})


@pytest.mark.parametrize("case", FUSION_CASES, ids=_fusion_id)
def test_fused_inference_equals_training_path(gen, device, case):
    """Without a gradient the layer runs the fine kernel with the gate combine in its
    epilogue; with one, the training op, which also keeps the attention. Same bits."""
    if device == "cuda" and case["dtype"] == torch.float32:
        pytest.skip("the CUDA backend takes 16-bit inputs")
    p = draw_layer_problem(gen, **case).to(device)
    with torch.no_grad():
        fused = layer(p)
    leaf = p.q.clone().requires_grad_()
    unfused = vsa.video_sparse_attn(leaf, p.k, p.v, p.vbs, p.q_vbs, p.topk, p.block, p.gate,
                                    layout=p.layout)
    assert unfused.requires_grad and not fused.requires_grad
    assert torch.equal(fused, unfused.detach())
    assert torch.equal(layer(p), fused)  # grad mode on, but nothing requires a gradient: fused too
    want, *_ = reference_layer(*p.to("cpu").inputs(), p.to("cpu").gate, block=p.block, layout=p.layout)
    assert rel_error(fused.cpu(), want) <= (1e-5 if case["dtype"] == torch.float32 else 1e-2)


def test_fused_stage_function_equals_the_two_stages(gen):
    p = draw_layer_problem(gen, heads=4, kv_heads=2, dtype=torch.bfloat16, layout="bshd")
    means = block_means(p.q, p.k, p.v, p.q_vbs, p.vbs, layout="bshd")
    coarse, q2k_idx, q2k_num = coarse_stage(*means, p.vbs, p.topk)
    for gate in (p.gate, None):
        for q_vbs in (p.q_vbs, None):  # the layer's padding rows, or every row computed
            fused = fine_stage_gated(p.q, p.k, p.v, q2k_idx, q2k_num, p.vbs, coarse, gate, layout="bshd",
                                     q_variable_block_sizes=q_vbs)
            fine = fine_stage(p.q, p.k, p.v, q2k_idx, q2k_num, p.vbs, layout="bshd", q_variable_block_sizes=q_vbs)
            assert torch.equal(fused, gate_combine(fine, coarse, gate, layout="bshd"))


def test_training_fine_stage_keeps_the_attention_and_lse(gen):
    """vsa::fine_stage_gated_training: out as the fused stage gives it, fine and lse bitwise as
    vsa::forward gives them (what the fine stage's backward reads), from one kernel."""
    p = draw_layer_problem(gen, heads=4, kv_heads=2, dtype=torch.bfloat16, layout="bshd")
    means = block_means(p.q, p.k, p.v, p.q_vbs, p.vbs, layout="bshd")
    coarse, q2k_idx, q2k_num = coarse_stage(*means, p.vbs, p.topk)
    for gate in (p.gate, None):
        out, fine, lse = torch.ops.vsa.fine_stage_gated_training(p.q, p.k, p.v, q2k_idx, q2k_num, p.vbs, p.q_vbs,
                                                                 coarse, gate, 0.0, "bshd")
        want_fine, want_lse = torch.ops.vsa.forward(p.q, p.k, p.v, q2k_idx, q2k_num, p.vbs, p.q_vbs, 0.0, True,
                                                    "bshd", False)
        assert torch.equal(fine, want_fine) and torch.equal(lse, want_lse)
        assert torch.equal(out, gate_combine(want_fine, coarse, gate, layout="bshd"))


def test_block_means_is_three_block_mean_calls_in_one_with_their_gradients(gen):
    p = draw_layer_problem(gen, heads=4, kv_heads=2, dtype=torch.float32, layout="bshd")
    leaves = [t.clone().requires_grad_() for t in (p.q, p.k, p.v)]
    means = block_means(*leaves, p.q_vbs, p.vbs, layout="bshd")
    singles = [torch.ops.vsa.block_mean(t, c, "bshd") for t, c in zip(leaves, (p.q_vbs, p.vbs, p.vbs))]
    for got, want in zip(means, singles):
        assert torch.equal(got, want)
    weights = [torch.randn(m.shape, generator=gen) for m in means]
    grads = torch.autograd.grad(sum((m * w).sum() for m, w in zip(means, weights)), leaves)
    want = torch.autograd.grad(sum((m * w).sum() for m, w in zip(singles, weights)), leaves)
    for got, expected in zip(grads, want):
        assert torch.equal(got, expected)


def test_stages_compose_to_the_layer(gen):
    p = draw_layer_problem(gen, heads=4, kv_heads=2, dtype=torch.bfloat16)
    q_mean, k_mean, v_mean = block_means(p.q, p.k, p.v, p.q_vbs, p.vbs)
    # Means: float64 sums of the 16-bit tokens, rounded once to float32.
    assert torch.equal(q_mean, reference_means(p.q, p.q_vbs, 64).float())
    assert torch.equal(k_mean, reference_means(p.k, p.vbs, 64).float())
    assert torch.equal(v_mean, reference_means(p.v, p.vbs, 64).float())
    coarse, q2k_idx, q2k_num = coarse_stage(q_mean, k_mean, v_mean, p.vbs, p.topk)
    fine = fine_stage(p.q, p.k, p.v, q2k_idx, q2k_num, p.vbs, q_variable_block_sizes=p.q_vbs)
    out = gate_combine(fine, coarse, p.gate)
    assert torch.equal(out, layer(p))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph_forward_and_backward(gen, backend):
    torch._dynamo.reset()
    p = draw_clear_problem(gen, heads=4, kv_heads=2, layout="bshd")

    def step(q, k, v, gate):
        return vsa.video_sparse_attn(q * 1.5, k, v, p.vbs, p.q_vbs, p.topk, gate=gate.sigmoid(),
                                     layout="bshd").square().sum()

    compiled = torch.compile(step, fullgraph=True, backend=backend)
    grads = []
    for fn in (compiled, step):
        leaves = [t.clone().requires_grad_() for t in (p.q, p.k, p.v, p.gate)]
        fn(*leaves).backward()
        grads.append([leaf.grad for leaf in leaves])
    for got, want in zip(*grads):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    torch._dynamo.reset()


@pytest.mark.parametrize("shared", ["vbs", "kv", "qkv"])
def test_compile_fullgraph_training_with_one_tensor_passed_twice(gen, shared):
    """Self-attention passes one tensor more than once: the block sizes as both
    variable_block_sizes and q_variable_block_sizes, or one tensor as k and v (or q, k and v).
    The training node still traces into one graph, with eager's gradients."""
    torch._dynamo.reset()
    p = draw_clear_problem(gen, heads=2, kv_heads=2, nq=4, nk=4, layout="bshd")
    graphs = []

    def step(q, k, v, gate):
        if shared != "vbs":
            k = v = (q if shared == "qkv" else k)
        q_vbs = p.vbs if shared == "vbs" else p.q_vbs
        return vsa.video_sparse_attn(q, k, v, p.vbs, q_vbs, p.topk, gate=gate, layout="bshd").square().sum()

    compiled = torch.compile(step, fullgraph=True, backend=_graph_recorder(graphs))
    grads = []
    for fn in (compiled, step):
        leaves = [t.clone().requires_grad_() for t in (p.q, p.k, p.v, p.gate)]
        fn(*leaves).backward()
        grads.append([leaf.grad for leaf in leaves])
    assert len(graphs) == 1
    for got, want in zip(*grads):
        assert (got is None) == (want is None)
        if got is not None:
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    torch._dynamo.reset()


def _graph_recorder(graphs):
    def backend(gm, example_inputs):
        graphs.append(gm.print_readable(print_output=False))  # with the autograd node's bodies
        return gm.forward
    return backend


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_compile_fullgraph_picks_fused_or_unfused(gen, grad):
    """Both paths trace into one graph (no break, no host sync): the fused op without a
    gradient, the training node (the fused op that keeps the attention, and the backward's
    ops) with one; each matches eager bitwise."""
    torch._dynamo.reset()
    p = draw_clear_problem(gen, heads=4, kv_heads=2, layout="bshd", dtype=torch.bfloat16)
    graphs = []

    def step(q, k, v, gate):
        return vsa.video_sparse_attn(q, k, v, p.vbs, p.q_vbs, p.topk, gate=gate, layout="bshd")

    compiled = torch.compile(step, fullgraph=True, backend=_graph_recorder(graphs))
    q = p.q.clone().requires_grad_(grad)
    with torch.set_grad_enabled(grad):
        got, want = compiled(q, p.k, p.v, p.gate), step(q, p.k, p.v, p.gate)
    assert torch.equal(got.detach(), want.detach())
    assert len(graphs) == 1
    assert "fine_stage_gated" in graphs[0]
    assert ("fine_stage_gated_training" in graphs[0]) == grad
    assert ("gate_combine_backward" in graphs[0]) == grad
    torch._dynamo.reset()


def test_stage_functions_take_the_layers_metadata_and_name_bad_topk(gen):
    """block_means and coarse_stage take the block sizes as the layer does (any integer dtype,
    any strides), and coarse_stage refuses a top-k that is no block count in [1, NK]."""
    p = draw_layer_problem(gen, nq=2, nk=3)
    want = block_means(p.q, p.k, p.v, p.q_vbs, p.vbs)
    strided = torch.stack([p.vbs, p.vbs], -1)[:, 0]
    for got in (block_means(p.q, p.k, p.v, p.q_vbs.to(torch.int16), p.vbs.to(torch.int16)),
                block_means(p.q, p.k, p.v, p.q_vbs, strided)):
        for g, w in zip(got, want):
            assert torch.equal(g, w)
    assert torch.equal(coarse_stage(*want, p.vbs.to(torch.int16), 2)[1], coarse_stage(*want, p.vbs, 2)[1])
    for topk in (0, 4, 2.5, True, -1):
        with pytest.raises(ValueError, match="'topk'"):
            coarse_stage(*want, p.vbs, topk)


def test_bad_arguments(gen):
    p = draw_layer_problem(gen, nq=2, nk=3)
    with pytest.raises(ValueError, match="'topk'"):
        vsa.video_sparse_attn(*p.inputs()[:5], 4)
    with pytest.raises(ValueError, match="'topk'"):
        vsa.video_sparse_attn(*p.inputs()[:5], 0)
    for not_a_count in (2.5, True):  # int() would have made 2.5 a silent 2
        with pytest.raises(ValueError, match="'topk'"):
            vsa.video_sparse_attn(*p.inputs()[:5], not_a_count)
    with pytest.raises(ValueError, match="'variable_block_sizes.shape'"):
        vsa.video_sparse_attn(p.q, p.k, p.v, p.vbs[:2], p.q_vbs, 1)
    with pytest.raises(ValueError, match="'q_variable_block_sizes.shape'"):
        vsa.video_sparse_attn(p.q, p.k, p.v, p.vbs, p.q_vbs[:1], 1)
    with pytest.raises(ValueError, match="'layout'"):
        vsa.video_sparse_attn(*p.inputs(), layout="sbhd")
    with pytest.raises(ValueError, match="'gate.dtype'"):
        vsa.video_sparse_attn(*p.inputs(), gate=p.gate.half())


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "training"])
def test_the_block_means_errors_name_the_callers_arguments(gen, grad):
    # The block means' core checks named their parts' fields: 'q.valid_counts' for a bad
    # q_variable_block_sizes, 'k.x.dtype' for k's dtype.
    p = draw_layer_problem(gen, nq=2, nk=3)
    too_many = p.q_vbs.clone()
    too_many[1] = 65
    bad = [(dict(q_variable_block_sizes=too_many), r"'q_variable_block_sizes': .* got 65 at block 1"),
           (dict(q_variable_block_sizes=p.q_vbs[None]), r"'q_variable_block_sizes': expected rank 1"),
           (dict(variable_block_sizes=p.vbs - 1), r"'variable_block_sizes': .* got -1 at block 2"),
           (dict(k=p.k.half(), v=p.v.half()), r"'k\.dtype'"),
           (dict(q=p.q[..., :32], k=p.k[..., :32], v=p.v[..., :32]), r"'q\.shape'")]
    args = dict(q=p.q, k=p.k, v=p.v, variable_block_sizes=p.vbs, q_variable_block_sizes=p.q_vbs)
    for change, message in bad:
        a = {**args, **change}
        with torch.set_grad_enabled(grad), pytest.raises((ValueError, vsa.UnsupportedError), match=message):
            vsa.video_sparse_attn(a["q"].detach().requires_grad_(grad), a["k"], a["v"], a["variable_block_sizes"],
                                  a["q_variable_block_sizes"], 1)
        with pytest.raises((ValueError, vsa.UnsupportedError), match=message):
            block_means(a["q"], a["k"], a["v"], a["q_variable_block_sizes"], a["variable_block_sizes"])


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_keys_and_values_unlike_q_are_named(gen, layout):
    # The coarse stage named them through their block means: 'k_mean.shape', 'v_mean.shape'.
    p = draw_layer_problem(gen, heads=2, nq=2, nk=3, layout=layout)
    head = 1 if layout == "bhsd" else 2
    k3 = torch.cat([p.k, p.k.narrow(head, 0, 1)], head)  # 3 kv heads for q's 2
    for k, v, name in ((torch.cat([p.k, p.k]), torch.cat([p.v, p.v]), "k"), (k3, k3, "k"),
                       (torch.cat([p.k, p.k], -1), torch.cat([p.v, p.v], -1), "k"),
                       (p.k, p.v.narrow(head, 0, 1), "v"), (p.k, torch.cat([p.v, p.v], -1), "v"),
                       (p.k, p.v.narrow(3 - head, 0, 128), "v")):
        with pytest.raises(ValueError, match=rf"'{name}\.shape'"):
            vsa.video_sparse_attn(p.q, k, v, p.vbs, p.q_vbs, 1, layout=layout)


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_an_unsupported_head_dim_of_q_is_named_before_k(gen, layout, grad):
    # k's head dim was checked against q's first: q of D = 32 with k of 64 was 'k.shape:
    # expected ... head dim 32', an error pointing at the k that is fine.
    p = draw_layer_problem(gen, heads=2, nq=2, nk=3, layout=layout)
    with torch.set_grad_enabled(grad), pytest.raises(vsa.UnsupportedError, match=r"'q\.shape': .* D = 32"):
        vsa.video_sparse_attn(p.q[..., :32].requires_grad_(grad), p.k, p.v, p.vbs, p.q_vbs, 1, layout=layout)
    with pytest.raises(ValueError, match=r"'k\.shape': .* head dim 64"):  # q's is supported: k is the one
        vsa.video_sparse_attn(p.q, p.k[..., :32], p.v[..., :32], p.vbs, p.q_vbs, 1, layout=layout)


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("name", ["q", "k", "v"])
def test_a_tensor_of_another_rank_is_named(gen, name, layout):
    # The block-count check read the sequence axis of any q and k: one of rank 2 raised
    # IndexError ('tuple index out of range') before any message could name it.
    p = draw_layer_problem(gen, nq=2, nk=3, layout=layout)
    tensors = dict(q=p.q, k=p.k, v=p.v)
    for bad in (tensors[name][0, 0], tensors[name][0]):
        args = {**tensors, name: bad}
        with pytest.raises(ValueError, match=f"'{name}"):
            vsa.video_sparse_attn(args["q"], args["k"], args["v"], p.vbs, p.q_vbs, 1, layout=layout)


def _stage_call(p, stage):
    """A stage function's call on p's tensors, and those tensors by name (to move one elsewhere)."""
    means = block_means(p.q, p.k, p.v, p.q_vbs, p.vbs)
    coarse, q2k_idx, q2k_num = coarse_stage(*means, p.vbs, 2)
    if stage == "block_means":
        return (lambda t: block_means(t["q"], t["k"], t["v"], t["q_variable_block_sizes"], t["variable_block_sizes"]),
                dict(q=p.q, k=p.k, v=p.v, q_variable_block_sizes=p.q_vbs, variable_block_sizes=p.vbs))
    if stage == "coarse_stage":
        return (lambda t: coarse_stage(t["q_mean"], t["k_mean"], t["v_mean"], t["variable_block_sizes"], 2),
                dict(zip(("q_mean", "k_mean", "v_mean"), means), variable_block_sizes=p.vbs))
    if stage == "gate_combine":
        fine = fine_stage(p.q, p.k, p.v, q2k_idx, q2k_num, p.vbs)
        return (lambda t: gate_combine(t["fine"], t["coarse"], t["gate"]), dict(fine=fine, coarse=coarse, gate=p.gate))
    return (lambda t: fine_stage_gated(t["q"], t["k"], t["v"], t["q2k_idx"], t["q2k_num"], t["variable_block_sizes"],
                                       t["coarse"], t["gate"], q_variable_block_sizes=t["q_variable_block_sizes"]),
            dict(q=p.q, k=p.k, v=p.v, q2k_idx=q2k_idx, q2k_num=q2k_num, variable_block_sizes=p.vbs, coarse=coarse,
                 gate=p.gate, q_variable_block_sizes=p.q_vbs))


def _strided(t):
    """t's values in a view that is not contiguous (every other element of a wider tensor)."""
    return torch.stack([t, torch.full_like(t, float("nan"))], -1)[..., 0]


def test_stage_functions_take_means_and_coarse_of_any_strides(gen):
    # The core reads means and coarse contiguous: a view of them was refused ('q_mean.stride',
    # 'coarse.stride') where block_sparse_attn takes q, k and v of any strides.
    p = draw_layer_problem(gen, nq=2, nk=3)
    means = [m.requires_grad_() for m in block_means(p.q, p.k, p.v, p.q_vbs, p.vbs)]
    coarse, q2k_idx, q2k_num = coarse_stage(*means, p.vbs, 2)
    fine = fine_stage(p.q, p.k, p.v, q2k_idx, q2k_num, p.vbs).requires_grad_()
    gate = p.gate.clone().requires_grad_()
    dout = torch.randn(p.q.shape, generator=gen)
    leaves = [*means, fine, gate]

    def run(view):
        got_coarse, got_idx, got_num = coarse_stage(*(view(m) for m in means), p.vbs, 2)
        out = gate_combine(fine, view(got_coarse), gate)
        fused = fine_stage_gated(p.q, p.k, p.v, got_idx, got_num, p.vbs, view(got_coarse.detach()), p.gate)
        grads = torch.autograd.grad(out, leaves, dout)
        return (got_coarse, got_idx, got_num, out, fused, *grads)

    for got, want in zip(run(_strided), run(lambda t: t)):
        assert torch.equal(got, want)


@pytest.mark.parametrize("stage", ["block_means", "coarse_stage", "gate_combine", "fine_stage_gated"])
def test_stage_functions_name_a_tensor_on_another_device(gen, stage):
    # A meta tensor among CPU ones made torch dispatch the stage op to its fake kernel, which
    # returned uninitialized CPU memory as the result (block_sparse_attn and the layer refuse it).
    call, tensors = _stage_call(draw_layer_problem(gen, nq=2, nk=3), stage)
    call(tensors)  # as given, it runs
    for name in tensors:  # named itself, or as the one the others are held to
        with pytest.raises(ValueError, match=rf"'{name}\.device'|\(as {name}\)"):
            call({**tensors, name: tensors[name].to("meta")})


@pytest.mark.parametrize("block_size", [64.5, "64", True, 32, 256, (4, 4, 4.5), (8, 8), (-4, -4, 4)], ids=repr)
def test_bad_block_size_is_named(gen, block_size):
    # int() took 64.5 and '64' as 64 and a 2-axis tile of 64 passed; other sizes were named as
    # variable_block_sizes ('one entry per 32-token block of k').
    p = draw_layer_problem(gen, nq=2, nk=3)
    with pytest.raises(ValueError, match="'block_size'"):
        vsa.video_sparse_attn(*p.inputs(), block_size)


@pytest.mark.parametrize("block_size", [64, (4, 4, 4), [1, 8, 8]], ids=repr)
def test_block_size_as_tokens_or_a_tile(gen, block_size):
    p = draw_layer_problem(gen, nq=2, nk=3)
    assert torch.equal(vsa.video_sparse_attn(*p.inputs(), block_size), vsa.video_sparse_attn(*p.inputs()))
