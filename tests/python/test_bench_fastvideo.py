"""The FastVideo peer adapters against a fake `fastvideo_kernel` laid out like the real one (the
package re-exports a function named like its block_sparse_attn module), so what they import,
pass and convert is checked without a GPU. test_bench_fastvideo_gpu.py runs the real package."""

import math
import os
import sys
import textwrap

import pytest
import torch

from vsa.bench import fastvideo
from vsa.bench.problem import LayerProblem, Problem, Unavailable

FAKE = {
    "__init__.py": """
        from fastvideo_kernel.ops import video_sparse_attn
        from fastvideo_kernel.block_sparse_attn import block_sparse_attn  # shadows the module
    """,
    "block_sparse_attn.py": """
        calls = []

        def _op(kind):
            def op(q, k, v, q2k_idx, q2k_num, vbs):
                calls.append((kind, q, k, v, q2k_idx, q2k_num, vbs))
                return q + 1, "lse"
            return op

        block_sparse_attn_sm90 = _op("tk")
        block_sparse_attn_triton = _op("triton")

        def block_sparse_attn(q, k, v, block_map, vbs):
            raise AssertionError("the bool-mask wrapper is not what the benchmark times")
    """,
    "ops.py": """
        import os
        calls = []

        def video_sparse_attn(q, k, v, vbs, q_vbs, topk, block_size=64, gate=None):
            calls.append(dict(vbs=vbs, q_vbs=q_vbs, topk=topk, block_size=block_size,
                              triton=os.environ.get("FASTVIDEO_VSA_TRITON")))
            return q * 2
    """,
    "_C/__init__.py": """
        import os
        if os.environ.get("FAKE_TK_BUILD_FAILS"):
            raise RuntimeError("Error building extension 'fastvideo_tk'")
        fastvideo_kernel_ops = object()
    """,
}


@pytest.fixture
def fake_fastvideo(tmp_path, monkeypatch):
    for name, text in FAKE.items():
        path = tmp_path / "fastvideo_kernel" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m.startswith("fastvideo_kernel")]:
        monkeypatch.delitem(sys.modules, name)
    # The fake tensors live on the CPU: every static check passes, as on an H200.
    monkeypatch.setattr(fastvideo, "unsupported", lambda q, k, block_size, block_sizes=(): None)
    monkeypatch.setattr(fastvideo, "tk_unsupported", lambda q, k, block_size, block_sizes=(): None)
    yield
    for name in [m for m in sys.modules if m.startswith("fastvideo_kernel")]:
        del sys.modules[name]


def _problem(gen):
    q, k, v = (torch.randn(1, 2, 4 * 64, 16, generator=gen) for _ in range(3))
    # int64, non-contiguous lists: what the adapters must turn into FastVideo's int32 contiguous.
    idx = torch.randint(0, 4, (1, 2, 4, 6), generator=gen)[..., ::2]
    num = torch.full((1, 2, 4), 3, dtype=torch.int64)
    vbs = torch.tensor([64, 64, 64, 17])
    return Problem((q, k, v), 64, idx, num, vbs)


@pytest.mark.parametrize("peer, kind", [(fastvideo.tk_attention, "tk"),
                                        (fastvideo.triton_attention, "triton")])
def test_attention_adapters_call_the_op_with_int32_lists(fake_fastvideo, gen, peer, kind):
    p = _problem(gen)
    runner = peer(p)
    out = runner(*p.example)
    assert torch.equal(out, p.example[0] + 1)  # the op's first output, not its lse

    import fastvideo_kernel

    # `import fastvideo_kernel.block_sparse_attn as ops` would give the function, as on the H200.
    assert callable(fastvideo_kernel.block_sparse_attn)
    ops = sys.modules["fastvideo_kernel.block_sparse_attn"]
    (called, q, k, v, idx, num, vbs), = ops.calls
    assert called == kind and q is p.example[0] and v is p.example[2]
    for got, want in ((idx, p.q2k_idx), (num, p.q2k_num), (vbs, p.variable_block_sizes)):
        assert got.dtype == torch.int32 and got.is_contiguous() and torch.equal(got.long(), want)


def _token_mask(q2k_idx, q2k_num, vbs, block, q_blocks):
    """[B, H, q tokens, kv tokens]: which key tokens each query token attends, read off the lists
    one entry at a time (the reference for the 64-token expansion)."""
    b, h = q2k_num.shape[:2]
    mask = torch.zeros(b, h, q_blocks * block, vbs.numel() * block, dtype=torch.bool)
    for bi in range(b):
        for hi in range(h):
            for i in range(q_blocks):
                for j in range(int(q2k_num[bi, hi, i])):
                    kv = int(q2k_idx[bi, hi, i, j])
                    mask[bi, hi, i * block:(i + 1) * block, kv * block:kv * block + int(vbs[kv])] = True
    return mask


def _lists_128(gen, q_blocks=3, kv_blocks=5, entries=4):
    idx = torch.stack([torch.randperm(kv_blocks, generator=gen)[:entries]
                       for _ in range(2 * q_blocks)]).reshape(1, 2, q_blocks, entries)
    num = torch.randint(0, entries + 1, (1, 2, q_blocks), generator=gen)
    num[0, 0, 0] = entries
    # Padding past each count holds anything, here out-of-range ids.
    idx = torch.where(torch.arange(entries) < num[..., None], idx, 1000)
    vbs = torch.tensor([128, 17, 64, 65, 0])  # two halves, one, one exactly, two, none
    return idx, num, vbs


def test_lists_as_64_token_blocks_attend_the_same_tokens(gen):
    for _ in range(20):
        idx, num, vbs = _lists_128(gen)
        idx64, num64, vbs64 = fastvideo.lists_as_64_token_blocks(idx, num, vbs)
        assert idx64.shape == (1, 2, 6, 8) and num64.shape == (1, 2, 6)
        assert torch.equal(vbs64, torch.tensor([64, 64, 17, 0, 64, 0, 64, 1, 0, 0]))
        assert torch.equal(_token_mask(idx64, num64, vbs64, 64, 6), _token_mask(idx, num, vbs, 128, 3))
        for head in range(2):
            for row in range(6):  # no empty half listed; list order kept
                listed = idx64[0, head, row, :num64[0, head, row]]
                assert (vbs64[listed] > 0).all()
                halves = [torch.tensor([2 * b, 2 * b + 1])[vbs64[[2 * b, 2 * b + 1]] > 0]
                          for b in idx[0, head, row // 2, :num[0, head, row // 2]].tolist()]
                assert torch.equal(listed, torch.cat(halves or [torch.zeros(0, dtype=torch.int64)]))


@pytest.mark.parametrize("peer, kind", [(fastvideo.tk_attention, "tk"),
                                        (fastvideo.triton_attention, "triton")])
def test_attention_adapters_run_128_token_blocks_as_halves(fake_fastvideo, gen, peer, kind):
    idx, num, vbs = _lists_128(gen)
    q, k, v = (torch.randn(1, 2, 3 * 128, 16, generator=gen) for _ in range(3))
    runner = peer(Problem((q, k, v), 128, idx, num, vbs))
    runner(q, k, v)
    (called, _, _, _, idx32, num32, vbs32), = sys.modules["fastvideo_kernel.block_sparse_attn"].calls
    assert called == kind
    for got, want in zip((idx32, num32, vbs32), fastvideo.lists_as_64_token_blocks(idx, num, vbs)):
        assert got.dtype == torch.int32 and got.is_contiguous() and torch.equal(got.long(), want)


def test_tk_build_failure_is_reported_not_run_as_triton(fake_fastvideo, gen, monkeypatch):
    monkeypatch.setenv("FAKE_TK_BUILD_FAILS", "1")
    with pytest.raises(Unavailable, match="importing fastvideo_kernel._C failed: RuntimeError: "
                                          "Error building extension"):
        fastvideo.tk_attention(_problem(gen))
    layer = LayerProblem(_problem(gen).example, 64, torch.tensor([64] * 4), 2,
                         torch.zeros(1, 2, 4, 2, dtype=torch.int32),
                         torch.full((1, 2, 4), 2, dtype=torch.int32))
    with pytest.raises(Unavailable, match="fastvideo_kernel._C"):
        fastvideo.tk_layer(layer)
    fastvideo.triton_attention(_problem(gen))  # Triton needs no extension


def test_missing_package_is_unavailable(gen, monkeypatch):
    monkeypatch.setattr(fastvideo, "unsupported", lambda q, k, block_size, block_sizes=(): None)
    monkeypatch.setitem(sys.modules, "fastvideo_kernel", None)  # import fails as if absent
    with pytest.raises(Unavailable, match="fastvideo_kernel.block_sparse_attn not importable.*"
                                          "shared/peers"):
        fastvideo.triton_attention(_problem(gen))


@pytest.mark.parametrize("peer, switch", [(fastvideo.tk_layer, "0"),
                                          (fastvideo.triton_layer, "1")])
def test_layer_adapter_passes_a_tile_side_and_pins_the_fine_stage(fake_fastvideo, gen,
                                                                   monkeypatch, peer, switch):
    monkeypatch.setenv("FASTVIDEO_VSA_TRITON", "previous")
    p = _problem(gen)
    vbs = torch.tensor([64, 64, 64, 17], dtype=torch.int32)
    runner = peer(LayerProblem(p.example, 64, vbs, 3, p.q2k_idx, p.q2k_num))
    out = runner(*p.example)
    assert torch.equal(out, p.example[0] * 2)

    (call,) = sys.modules["fastvideo_kernel.ops"].calls
    # block_size=4 is FastVideo's 4x4x4 tile; 64 would mean 64**3 tokens per block.
    assert call["block_size"] == 4 and 4 ** 3 == p.block_size
    assert call["vbs"] is vbs and call["q_vbs"] is vbs and call["topk"] == 3
    assert call["triton"] == switch  # set during the call ...
    assert os.environ["FASTVIDEO_VSA_TRITON"] == "previous"  # ... and restored after


def test_tk_lse_becomes_base_2(gen):
    head_dim = 128
    lse_e = torch.randn(1, 2, 8, generator=gen, dtype=torch.float64) * 5
    tk_lse = (-lse_e * math.sqrt(head_dim))[..., None]  # TK stores -lse_e / scale, [B, H, S, 1]
    got = fastvideo.tk_lse_base2(tk_lse, head_dim)
    assert got.shape == (1, 2, 8)
    torch.testing.assert_close(got, lse_e / math.log(2.0), rtol=1e-12, atol=1e-12)


def test_static_checks_on_the_cpu():
    q = torch.zeros(1, 2, 64, 16, dtype=torch.bfloat16)
    assert fastvideo.unsupported(q, q, 64) == "CUDA only"
    assert fastvideo.tk_unsupported(q, q, 64) == "CUDA only"
