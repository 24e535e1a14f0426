"""vsa.compat.fastvideo_kernel: FastVideo's VSA API on vsa, against float64 references
(fastvideo_reference.py), on the CPU and (gpu-marked) on CUDA. The shapes, dtypes and
calls follow FastVideo's own kernel tests, so what those check on the H200 is checked
here first."""

import importlib
import math
import re
import sys
from types import ModuleType

import pytest
import torch

import vsa
import vsa.compat
from attention_reference import rel_error
from fastvideo_reference import fastvideo_layer, masked_attention, token_mask, zero_pads
from vsa.compat import fastvideo_kernel as fk
from vsa.compat.fastvideo_kernel import block_sparse_attn_256 as fk256

# The package's block_sparse_attn attribute is the function (as in FastVideo); the module by path:
fk_bsa = importlib.import_module("vsa.compat.fastvideo_kernel.block_sparse_attn")

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
BF16 = 1e-2  # relative Frobenius error for bf16 results (the tests' bound)
FASTVIDEO_ALL = [  # fastvideo_kernel 0.3.2's __all__
    "sliding_tile_attention", "video_sparse_attn", "video_sparse_attn_bshd", "block_sparse_attn",
    "block_sparse_attn_from_indices", "block_sparse_attn_varlen", "moba_attn_varlen", "process_moba_input",
    "process_moba_output", "Int8Linear", "FastRMSNorm", "FastLayerNorm", "int8_linear", "int8_quant",
    "VSA_TILE_SIZE", "get_tile_partition_indices", "get_reverse_tile_partition_indices",
    "construct_variable_block_sizes", "get_non_pad_index", "build_vsa_metadata", "__version__",
]
UNSUPPORTED = ["sliding_tile_attention", "moba_attn_varlen", "process_moba_input", "process_moba_output",
               "int8_linear", "int8_quant", "Int8Linear", "FastRMSNorm", "FastLayerNorm"]


def randn(gen, *shape, device, dtype=torch.bfloat16, scale=1.0):
    return (torch.randn(shape, generator=gen) * scale).to(device=device, dtype=dtype)


def with_grads(fn, inputs, dout):
    inputs = [t.detach().clone().requires_grad_() for t in inputs]
    out = fn(*inputs)
    (out.double() * dout.double()).sum().backward()
    return out.detach(), [t.grad for t in inputs]


def expect_close(got, want, tol, what):
    assert torch.isfinite(got).all(), f"{what}: non-finite values"
    assert rel_error(got.cpu(), want.cpu()) <= tol, f"{what}: rel error {rel_error(got.cpu(), want.cpu()):.3e}"


# ---- the module, its registration and its refusals -------------------------------------------------


@pytest.fixture
def clean_modules(monkeypatch):
    """sys.modules restored after the test (install() edits it)."""
    for name in [n for n in sys.modules if n == "fastvideo_kernel" or n.startswith("fastvideo_kernel.")]:
        monkeypatch.delitem(sys.modules, name)
    yield monkeypatch
    vsa.compat.uninstall()


def test_install_serves_fastvideo_imports(clean_modules):
    assert vsa.compat.install() is fk
    assert vsa.compat.install() is fk  # idempotent
    import fastvideo_kernel
    from fastvideo_kernel.block_sparse_attn import _map_to_index, block_sparse_attn_triton  # noqa: F401
    from fastvideo_kernel.block_sparse_attn_256 import block_sparse_attn_128  # noqa: F401
    from fastvideo_kernel.block_sparse_attn_varlen import block_sparse_attn_varlen  # noqa: F401
    from fastvideo_kernel.vsa_utils import _canonicalize_device  # noqa: F401
    assert fastvideo_kernel is fk
    assert sorted(fastvideo_kernel.__all__) == sorted(FASTVIDEO_ALL)
    assert all(hasattr(fastvideo_kernel, name) for name in FASTVIDEO_ALL)
    assert sys.modules["fastvideo_kernel.ops"] is sys.modules["vsa.compat.fastvideo_kernel.ops"]
    with pytest.raises(ModuleNotFoundError):
        import fastvideo_kernel._C  # noqa: F401  (FastVideo code probes it to pick a backend)
    with pytest.raises(ModuleNotFoundError):
        import fastvideo_kernel.triton_kernels.st_attn_triton  # noqa: F401
    from fastvideo_kernel import block_sparse_attn_sm100a as sm100a
    assert sm100a.is_supported(torch.zeros(1, 1, 64, 64), torch.full((1,), 64)) is False
    with pytest.raises(vsa.UnsupportedError, match="block_sparse_attn_sm100a"):
        sm100a.block_sparse_attn_sm100a()


def test_index_helpers(clean_modules, gen):
    vsa.compat.install()
    from fastvideo_kernel.triton_kernels.index import invert_indices, map_to_index, topk_index_to_map
    topk = torch.stack([torch.randperm(7, generator=gen)[:3] for _ in range(2 * 3 * 5)]).reshape(2, 3, 5, 3)
    block_map = topk_index_to_map(topk, 7)
    assert block_map.shape == (2, 3, 5, 7) and block_map.sum(-1).eq(3).all()
    assert torch.equal(topk_index_to_map(topk, 7, transpose_map=True), block_map)
    q2k_idx, q2k_num = map_to_index(block_map)
    assert q2k_num.eq(3).all() and torch.equal(q2k_idx[..., :3], topk.sort(-1).values.int())
    k2q_idx, k2q_num = invert_indices(q2k_idx, q2k_num, 7)
    assert k2q_idx.shape == (2, 3, 7, 5) and torch.equal(k2q_num, block_map.sum(2).int())


def test_install_does_not_silently_replace_another_fastvideo_kernel(clean_modules):
    clean_modules.setitem(sys.modules, "fastvideo_kernel", ModuleType("fastvideo_kernel"))
    with pytest.raises(RuntimeError, match="already imported"):
        vsa.compat.install()
    assert vsa.compat.install(replace=True) is fk


def test_install_replace_drops_the_replaced_packages_modules(clean_modules):
    # replace=True registered vsa's package and submodules, but the replaced package's other
    # modules still imported by name: its extension, which FastVideo code probes to pick a
    # backend, and its optional backends.
    for name in ("fastvideo_kernel", "fastvideo_kernel._C", "fastvideo_kernel.block_sparse_attn",
                 "fastvideo_kernel.triton_kernels.st_attn_triton"):
        clean_modules.setitem(sys.modules, name, ModuleType(name))
    assert vsa.compat.install(replace=True) is fk
    with pytest.raises(ModuleNotFoundError):
        import fastvideo_kernel._C  # noqa: F401
    with pytest.raises(ModuleNotFoundError):
        import fastvideo_kernel.triton_kernels.st_attn_triton  # noqa: F401
    assert sys.modules["fastvideo_kernel.block_sparse_attn"] is fk_bsa
    assert vsa.compat.install() is fk and sys.modules["fastvideo_kernel.ops"].__name__.startswith("vsa.compat.")


@pytest.mark.parametrize("name", UNSUPPORTED)
def test_what_vsa_does_not_do_raises_naming_it(name):
    with pytest.raises(vsa.UnsupportedError, match=name):
        getattr(fk, name)(torch.zeros(1))


# ---- block-sparse attention -------------------------------------------------------------------------


def fastvideo_block_problem(gen, device, heads, nq, nk, topk, dim=64, block=64, min_valid=16):
    """As FastVideo's tests draw them: valid counts in [16, block], a random top-k block mask,
    zeros at the padded positions of q, k and v."""
    vbs = torch.randint(min_valid, block + 1, (nk,), generator=gen, dtype=torch.int32)
    q_vbs = torch.randint(min_valid, block + 1, (nq,), generator=gen, dtype=torch.int32)
    scores = torch.rand(heads, nq, nk, generator=gen)
    block_map = torch.zeros(heads, nq, nk, dtype=torch.bool).scatter_(-1, scores.topk(min(topk, nk)).indices, True)
    q = zero_pads(randn(gen, 1, heads, nq * block, dim, device="cpu"), q_vbs, block)
    k = zero_pads(randn(gen, 1, heads, nk * block, dim, device="cpu"), vbs, block)
    v = zero_pads(randn(gen, 1, heads, nk * block, dim, device="cpu"), vbs, block)
    return [t.to(device) for t in (q, k, v, block_map, vbs)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("nq,nk,topk,map_rank", [(5, 5, 2, 4), (3, 6, 4, 3), (6, 3, 1, 4)])
def test_block_sparse_attn_forward_backward_and_lse(gen, device, nq, nk, topk, map_rank):
    q, k, v, block_map, vbs = fastvideo_block_problem(gen, device, heads=3, nq=nq, nk=nk, topk=topk)
    the_map = block_map if map_rank == 3 else block_map.unsqueeze(0)
    dout = randn(gen, *q.shape, device=device)
    out, grads = with_grads(lambda *x: fk.block_sparse_attn(*x, the_map, vbs)[0], (q, k, v), dout)
    want, want_grads = with_grads(lambda *x: masked_attention(*x, token_mask(block_map[None], vbs, 64, 64))[0],
                                  (q.double(), k.double(), v.double()), dout)
    expect_close(out, want, BF16, "out")
    for name, g, w in zip("qkv", grads, want_grads):
        expect_close(g, w, BF16, f"d{name}")
    _, lse = fk.block_sparse_attn(q, k, v, the_map, vbs)
    _, want_lse = masked_attention(q, k, v, token_mask(block_map[None], vbs, 64, 64))
    assert lse.shape == q.shape[:3] and lse.dtype == torch.float32
    assert torch.allclose(lse.cpu().double(), want_lse.cpu(), atol=2e-2, rtol=0)  # base 2, like FastVideo's M


@pytest.mark.parametrize("device", DEVICES)
def test_a_three_axis_map_serves_every_video_of_the_batch(gen, device):
    # [H, NQ, NK] with batch 2 ran into q2k_idx's shape check, naming an argument the caller
    # never passed; it is now each video's map, as a [B, H, NQ, NK] map repeating it.
    q, k, v, block_map, vbs = fastvideo_block_problem(gen, device, heads=2, nq=4, nk=4, topk=2)
    q2, k2, v2 = (torch.cat([x, randn(gen, *x.shape, device=device)]) for x in (q, k, v))
    got = fk.block_sparse_attn(q2, k2, v2, block_map, vbs)
    want = fk.block_sparse_attn(q2, k2, v2, block_map.expand(2, -1, -1, -1), vbs)
    assert all(torch.equal(g, w) for g, w in zip(got, want))
    attn_128 = fk.block_sparse_attn_256.block_sparse_attn_128  # two 128-token blocks per axis
    map_128, vbs_128 = block_map[:, :2, :2], vbs[:2] * 2
    got_128 = attn_128(q2, k2, v2, map_128, vbs_128)
    want_128 = attn_128(q2, k2, v2, map_128.expand(2, -1, -1, -1), vbs_128)
    assert all(torch.equal(g, w) for g, w in zip(got_128, want_128))


@pytest.mark.parametrize("device", DEVICES)
def test_index_entry_points_are_the_mask_one(gen, device):
    q, k, v, block_map, vbs = fastvideo_block_problem(gen, device, heads=2, nq=4, nk=4, topk=2)
    want = fk.block_sparse_attn(q, k, v, block_map, vbs)
    q2k_idx, q2k_num = fk_bsa._map_to_index(block_map.unsqueeze(0))
    assert q2k_idx.dtype == torch.int32 and q2k_num.dtype == torch.int32
    for entry in (fk.block_sparse_attn_from_indices, fk_bsa.block_sparse_attn_triton, fk_bsa.block_sparse_attn_sm90):
        got = entry(q, k, v, q2k_idx, q2k_num, vbs)
        assert all(torch.equal(g, w) for g, w in zip(got, want)), entry.__name__


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("scale", [1.0, 4.0, 16.0])
def test_gradients_hold_at_large_activation_scale(gen, device, scale):
    """FastVideo's regression: logits of a few hundred must not wreck the backward."""
    q, k, v, block_map, _ = fastvideo_block_problem(gen, device, heads=2, nq=8, nk=8, topk=3, dim=128)
    q, k = q * scale, k * scale
    full = torch.full((8,), 64, dtype=torch.int32, device=device)
    dout = randn(gen, *q.shape, device=device)
    _, grads = with_grads(lambda *x: fk.block_sparse_attn(*x, block_map, full)[0], (q, k, v), dout)
    _, want = with_grads(lambda *x: masked_attention(*x, token_mask(block_map[None], full, 64, 64))[0],
                         (q.double(), k.double(), v.double()), dout)
    for name, g, w in zip("qkv", grads, want):
        expect_close(g, w, 5e-2, f"d{name}")
        assert 0.98 < float(g.double().norm() / w.norm()) < 1.02, f"d{name} norm"


# ---- 128- and 256-token blocks --------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("block", [128, 256])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_large_block_entry_points(gen, device, block, layout):
    # Counts at, above and below half a block: a 256-block's second half may be empty.
    vbs = torch.tensor([block, block // 2 + 27, 37, block // 2], dtype=torch.int32, device=device)
    q = randn(gen, 1, 2, 3 * block, 64, device=device)
    k, v = (zero_pads(randn(gen, 1, 2, 4 * block, 64, device=device), vbs, block) for _ in range(2))
    block_map = torch.rand(1, 2, 3, 4, generator=gen).to(device) < 0.5
    block_map[..., 0] = True  # every row sees a key
    entry = {(128, "bhsd"): fk256.block_sparse_attn_128, (128, "bshd"): fk256.block_sparse_attn_128_bshd,
             (256, "bhsd"): fk256.block_sparse_attn_256, (256, "bshd"): fk256.block_sparse_attn_256_bshd}
    dout = randn(gen, *q.shape, device=device)
    to_layout = (lambda t: t) if layout == "bhsd" else (lambda t: t.transpose(1, 2).contiguous())
    out, grads = with_grads(lambda *x: to_layout(entry[block, layout](*(to_layout(t) for t in x), block_map, vbs)[0]),
                            (q, k, v), dout)
    want, want_grads = with_grads(lambda *x: masked_attention(*x, token_mask(block_map, vbs, block, block))[0],
                                  (q.double(), k.double(), v.double()), dout)
    expect_close(out, want, BF16, "out")
    for name, g, w in zip("qkv", grads, want_grads):
        expect_close(g, w, BF16, f"d{name}")
    _, lse = entry[block, layout](to_layout(q), to_layout(k), to_layout(v), block_map[0], vbs)
    assert lse.shape == (1, 2, 3 * block)  # [B, H, S] in both layouts
    _, want_lse = masked_attention(q, k, v, token_mask(block_map, vbs, block, block))
    assert torch.allclose(lse.cpu().double(), want_lse.cpu(), atol=2e-2, rtol=0)  # base 2, like FastVideo's M


@pytest.mark.parametrize("block", [128, 256])
@pytest.mark.parametrize("counts,argument", [
    (lambda block: [block, block + 44], "'variable_block_sizes': .* got {} at block 1$"),
    (lambda block: [block, 2**32 + 128 + 44], "'variable_block_sizes': .* got {} at block 1$"),
    (lambda block: [block, -5], "'variable_block_sizes': .* got {} at block 1$"),
    (lambda block: [float(block), 100.7], "'variable_block_sizes.dtype'"),
], ids=["past the block", "past int32", "negative", "float"])
def test_large_block_entry_points_refuse_bad_block_sizes(gen, block, counts, argument):
    # 256-token counts are halved into 128-token ones; clamping both halves to [0, 128] made a
    # count past 256 a full block, a negative one an empty block and a float one its floor, all
    # run silently where the 128-token entry point refuses them; the halves made int32 made
    # 2^32 + 128 + 44 a second half of 44. A count is named by the caller's value and block,
    # not its half's ('got 172 at block 3' for a 300 at block 1).
    q = randn(gen, 1, 2, 2 * block, 64, device="cpu")
    entry = fk256.block_sparse_attn_128 if block == 128 else fk256.block_sparse_attn_256
    with pytest.raises(ValueError, match=argument.format(counts(block)[1])):  # the caller's value
        entry(q, q, q, torch.ones(1, 2, 2, 2, dtype=torch.bool), torch.tensor(counts(block)))


@pytest.mark.parametrize("block", [128, 256])
@pytest.mark.parametrize("shape", [[1, 3, 2, 2], [1, 2, 3, 2], [1, 2, 2, 3], [3, 2, 2]])
def test_large_block_entry_points_name_a_block_map_by_the_callers_shape(gen, block, shape):
    # A 256-token map was checked as its 128-token halves ('got [1, 2, 4, 6]'), and a wrong batch,
    # head or query-block count named the lists made of it ('q2k_idx.shape').
    q = randn(gen, 1, 2, 2 * block, 64, device="cpu")
    entry = fk256.block_sparse_attn_128 if block == 128 else fk256.block_sparse_attn_256
    with pytest.raises(ValueError, match=r"'block_map.shape': expected \[B, H, NQ, NK\] = \[1, 2, 2, 2\] "
                                         rf"or \[H, NQ, NK\] = \[2, 2, 2\].*got {re.escape(str(shape))}$"):
        entry(q, q, q, torch.ones(shape, dtype=torch.bool), torch.tensor([block, 100]))


@pytest.mark.parametrize("block", [128, 256])
def test_large_block_entry_points_refuse_block_sizes_of_two_axes(gen, block):
    # The 256-token counts were halved after a flatten: [[256, 200]] ran as the counts [256, 200].
    q = randn(gen, 1, 2, 2 * block, 64, device="cpu")
    entry = fk256.block_sparse_attn_128 if block == 128 else fk256.block_sparse_attn_256
    with pytest.raises(ValueError, match=r"'variable_block_sizes': expected rank 1, got rank 2 \[1, 2\]"):
        entry(q, q, q, torch.ones(1, 2, 2, 2, dtype=torch.bool), torch.tensor([[block, 100]]))
    with pytest.raises(ValueError, match=r"'variable_block_sizes.shape': .* got \[1, 3\]"):  # not [3]
        entry(q, q, q, torch.ones(1, 2, 2, 2, dtype=torch.bool), torch.tensor([[block, 100, 0]]))


# ---- the VSA layer ----------------------------------------------------------------------------------------


TILES = {64: (4, 4, 4), 128: (2, 8, 8), 256: (4, 8, 8)}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("block", [64, 128, 256])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("gated", [False, True])
def test_video_sparse_attn_matches_fastvideo_arithmetic(gen, device, block, layout, gated):
    nq, nk, topk = 3, 5, 2
    vbs = torch.tensor([block, block - 37, 21, block, block // 2 + 5], dtype=torch.int32, device=device)
    q_vbs = torch.tensor([block, block // 2 + 9, block - 3], dtype=torch.int32, device=device)
    q = zero_pads(randn(gen, 1, 2, nq * block, 64, device=device), q_vbs, block)
    k, v = (zero_pads(randn(gen, 1, 2, nk * block, 64, device=device), vbs, block) for _ in range(2))
    gate = randn(gen, *q.shape, device=device, scale=0.1)
    inputs = (q, k, v, gate) if gated else (q, k, v)
    dout = randn(gen, *q.shape, device=device)

    def shim(q_, k_, v_, gate_=None):
        if layout == "bhsd":
            return fk.video_sparse_attn(q_, k_, v_, vbs, q_vbs, topk, block_size=TILES[block],
                                        compress_attn_weight=gate_)
        t = lambda x: None if x is None else x.transpose(1, 2)  # noqa: E731
        return t(fk.video_sparse_attn_bshd(t(q_), t(k_), t(v_), vbs, q_vbs, topk, block_size=TILES[block],
                                           compress_attn_weight=t(gate_)))

    out, grads = with_grads(shim, inputs, dout)
    want, want_grads = with_grads(lambda *x: fastvideo_layer(*x[:3], vbs, q_vbs, topk, block, *x[3:]), inputs, dout)
    expect_close(out, want, BF16, "out")
    for name, g, w in zip(["dq", "dk", "dv", "dgate"], grads, want_grads):
        expect_close(g, w, BF16, name)


@pytest.mark.parametrize("device", DEVICES)
def test_inference_forward_is_the_training_forward(gen, device):
    vbs = torch.tensor([256, 173, 79, 256], dtype=torch.int32, device=device)
    q_vbs = torch.full((3,), 256, dtype=torch.int32, device=device)
    q = randn(gen, 1, 3 * 256, 2, 64, device=device)
    k, v = (randn(gen, 1, 4 * 256, 2, 64, device=device) for _ in range(2))
    with torch.no_grad():
        inference = fk.video_sparse_attn_bshd(q, k, v, vbs, q_vbs, 2, block_size=(4, 8, 8))
    training = fk.video_sparse_attn_bshd(q.requires_grad_(), k, v, vbs, q_vbs, 2, block_size=(4, 8, 8))
    assert torch.equal(inference, training.detach())


@pytest.mark.parametrize("call,argument", [
    (lambda q, vbs: fk.video_sparse_attn(q, q, q, vbs, vbs, 1), "'block_size'"),  # default 64: a 64^3 tile
    (lambda q, vbs: fk.video_sparse_attn(q, q, q, vbs, vbs, 1, block_size=3), "'block_size'"),
    (lambda q, vbs: fk.video_sparse_attn(q, q[:, :1], q[:, :1], vbs, vbs, 1, block_size=4), "'k.shape'"),
    (lambda q, vbs: fk.video_sparse_attn(q, q, q, vbs[:1], vbs, 1, block_size=4), "'variable_block_sizes.shape'"),
    (lambda q, vbs: fk.video_sparse_attn(q, q, q, vbs, vbs, 0, block_size=4), "'topk'"),
    # q_variable_block_sizes only divide the query means (the fine stage attends every row): no
    # check saw them, and a count past the block, negative or of two axes ran silently.
    (lambda q, vbs: fk.video_sparse_attn(q, q, q, vbs, torch.tensor([64, 100]), 1, block_size=4),
     r"'q_variable_block_sizes': expected values in \[0, blk = 64\], got 100 at block 1"),
    (lambda q, vbs: fk.video_sparse_attn(q, q, q, vbs, torch.tensor([-3, 64]), 1, block_size=4),
     r"'q_variable_block_sizes': .* got -3 at block 0"),
    (lambda q, vbs: fk.video_sparse_attn(q, q, q, vbs, vbs[None], 1, block_size=4),
     r"'q_variable_block_sizes.shape': .* got \[1, 2\]"),
    # A gate that is not q's shape failed in torch's broadcast or reshape (RuntimeError); one of
    # q's element count in another shape was reshaped to q's silently (bshd).
    (lambda q, vbs: fk.video_sparse_attn(q, q, q, vbs, vbs, 1, block_size=4, compress_attn_weight=q[:, :, :64]),
     r"'compress_attn_weight.shape': expected q's shape \[1, 2, 128, 64\] .*got \[1, 2, 64, 64\]"),
    (lambda q, vbs: fk.video_sparse_attn_bshd(*[q.transpose(1, 2)] * 3, vbs, vbs, 1, block_size=4,
                                              compress_attn_weight=q),
     r"'compress_attn_weight.shape': expected q's shape \[1, 128, 2, 64\] .*got \[1, 2, 128, 64\]"),
])
def test_video_sparse_attn_refuses_bad_arguments(call, argument):
    q = torch.randn(1, 2, 128, 64)
    with pytest.raises(ValueError, match=argument):
        call(q, torch.full((2,), 64, dtype=torch.int32))


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_video_sparse_attn_broadcasts_a_gate(gen, layout):
    # FastVideo's out = coarse * gate + fine broadcasts a gate against q's shape (one weight per
    # head and token here); the bshd path reshaped the gate and refused it.
    q = randn(gen, 1, 2, 128, 64, device="cpu")
    gate = torch.rand(1, 2, 128, 1, generator=gen).to(q.dtype)
    vbs = torch.tensor([64, 40], dtype=torch.int32)
    t = (lambda x: x) if layout == "bhsd" else (lambda x: x.transpose(1, 2))  # noqa: E731
    entry = fk.video_sparse_attn if layout == "bhsd" else fk.video_sparse_attn_bshd
    got = entry(t(q), t(q), t(q), vbs, vbs, 1, block_size=4, compress_attn_weight=t(gate))
    want = entry(t(q), t(q), t(q), vbs, vbs, 1, block_size=4, compress_attn_weight=t(gate.expand(q.shape)))
    assert torch.equal(got, want)


@pytest.mark.parametrize("topk", [2.5, 1.0, True, "1"], ids=repr)
def test_video_sparse_attn_names_a_topk_that_is_no_count(topk):
    # topk was compared with 1 only: 2.5 over two blocks ran as min(2.5, NK) = 2 blocks, and
    # 1.0, True or '1' failed inside torch.topk with a TypeError.
    q = torch.randn(1, 2, 128, 64)
    vbs = torch.full((2,), 64, dtype=torch.int32)
    with pytest.raises(ValueError, match="'topk'"):
        fk.video_sparse_attn(q, q, q, vbs, vbs, topk, block_size=4)


# ---- variable-length batches in FastVideo's form -----------------------------------------------------------


def fastvideo_varlen_case(gen, device, sizes, heads=2, dim=64, topk=2):
    """Per video: tokens [S, H, D] (unpadded), block counts in [16, 64], local lists."""
    videos = []
    for nq, nk in sizes:
        q, k, v, block_map, vbs = fastvideo_block_problem(gen, device, heads, nq, nk, topk, dim)
        q_vbs = torch.randint(16, 65, (nq,), generator=gen, dtype=torch.int32).to(device)
        q = randn(gen, int(q_vbs.sum()), heads, dim, device=device)
        k, v = (randn(gen, int(vbs.sum()), heads, dim, device=device) for _ in range(2))
        videos.append((q, k, v, *fk_bsa._map_to_index(block_map.unsqueeze(0)), vbs, q_vbs))
    return videos


def padded(tokens, counts):
    """[S, H, D] -> [1, H, N*64, D] with block b's first counts[b] slots filled."""
    at = fk.get_non_pad_index(counts, 64)
    out = tokens.new_zeros(tokens.shape[1], counts.numel() * 64, tokens.shape[2])
    return out.index_copy(1, at, tokens.transpose(0, 1)).unsqueeze(0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sizes", [[(2, 3), (5, 4), (3, 6)], [(1, 8), (8, 1)], [(4, 4)]])
def test_fastvideo_varlen_is_each_video_alone(gen, device, sizes):
    videos = fastvideo_varlen_case(gen, device, sizes)
    cu = lambda n: torch.tensor([0] + [int(x) for x in n], device=device).cumsum(0)  # noqa: E731
    cu_q, cu_kv = cu([v[0].shape[0] for v in videos]), cu([v[1].shape[0] for v in videos])
    packed = [torch.cat([v[n] for v in videos]) for n in range(3)]
    dout = randn(gen, *packed[0].shape, device=device)
    out, grads = with_grads(lambda *x: fk.block_sparse_attn_varlen(
        *x, cu_q, cu_kv, [v[3] for v in videos], [v[4] for v in videos], [v[5] for v in videos],
        q_variable_block_sizes_list=[v[6] for v in videos]), packed, dout)

    alone = []
    for n, (q, k, v, idx, num, vbs, q_vbs) in enumerate(videos):
        rows = slice(int(cu_q[n]), int(cu_q[n + 1]))
        at = fk.get_non_pad_index(q_vbs, 64)
        alone.append(with_grads(lambda q_, k_, v_: fk.block_sparse_attn_from_indices(
            padded(q_, q_vbs), padded(k_, vbs), padded(v_, vbs), idx, num, vbs)[0][0][:, at].transpose(0, 1),
            (q, k, v), dout[rows]))
    # The same rows through the same kernels: bitwise what each video gives alone.
    assert torch.equal(out, torch.cat([a[0] for a in alone]))
    for n in range(3):
        assert torch.equal(grads[n], torch.cat([a[1][n] for a in alone])), "dqkv"[n]


def test_fastvideo_varlen_refuses_block_sizes_that_drop_tokens(gen):
    (q, k, v, idx, num, vbs, q_vbs), = fastvideo_varlen_case(gen, "cpu", [(2, 2)])
    cu_q, cu_kv = torch.tensor([0, q.shape[0]]), torch.tensor([0, k.shape[0] + 1])
    with pytest.raises(ValueError, match="'variable_block_sizes_list\\[0\\]'"):  # one KV token past them
        fk.block_sparse_attn_varlen(q, torch.cat([k, k[:1]]), torch.cat([v, v[:1]]), cu_q, cu_kv, [idx], [num],
                                    [vbs], [q_vbs])
    with pytest.raises(ValueError, match="'q_variable_block_sizes_list\\[0\\].shape'"):
        fk.block_sparse_attn_varlen(q, k, v, cu_q, torch.tensor([0, k.shape[0]]), [idx], [num], [vbs],
                                    [torch.cat([q_vbs, q_vbs.new_zeros(1)])])
    with pytest.raises(ValueError, match="'q_variable_block_sizes_list\\[0\\]'"):  # a count past the block
        fk.block_sparse_attn_varlen(q, k, v, torch.tensor([0, q.shape[0]]), torch.tensor([0, k.shape[0]]), [idx],
                                    [num], [vbs], [torch.stack([q_vbs.new_tensor(65), q_vbs.sum() - 65])])
    with pytest.raises(ValueError, match="'q2k_idx_list\\[0\\].shape'"):  # one query block short of num
        fk.block_sparse_attn_varlen(q, k, v, torch.tensor([0, q.shape[0]]), torch.tensor([0, k.shape[0]]),
                                    [idx[:, :, :1]], [num], [vbs], [q_vbs])
    with pytest.raises(ValueError, match="'q2k_num_list\\[0\\].shape'"):  # a batch of two
        fk.block_sparse_attn_varlen(q, k, v, torch.tensor([0, q.shape[0]]), torch.tensor([0, k.shape[0]]),
                                    [idx], [torch.cat([num, num])], [vbs], [q_vbs])
    copies = 2 * 64 // q.shape[0] + 1  # q holds 32..128 tokens: enough copies to pass 2 full blocks
    with pytest.raises(ValueError, match="'cu_seqlens_q"):  # more tokens than 2 full blocks
        fk.block_sparse_attn_varlen(torch.cat([q] * copies), k, v, torch.tensor([0, copies * q.shape[0]]),
                                    torch.tensor([0, k.shape[0]]), [idx], [num], [vbs])


def test_fastvideo_varlen_reads_the_rows_cu_seqlens_give(gen):
    # FastVideo reads sequence i at rows cu_seqlens[i]:cu_seqlens[i + 1] and returns cu_seqlens_q[-1]
    # rows: tokens past the last offset (a padded token buffer) are no sequence's. They raised
    # IndexError from index_copy_ here, as did offsets that start past 0.
    videos = fastvideo_varlen_case(gen, "cpu", [(2, 3), (3, 2)])
    cu = lambda n: torch.tensor([0] + [int(x) for x in n]).cumsum(0)  # noqa: E731
    cu_q, cu_kv = cu([v[0].shape[0] for v in videos]), cu([v[1].shape[0] for v in videos])
    packed = [torch.cat([v[n] for v in videos]) for n in range(3)]
    lists = [[v[n] for v in videos] for n in (3, 4, 5, 6)]
    call = lambda q, k, v, cq, ckv: fk.block_sparse_attn_varlen(  # noqa: E731
        q, k, v, cq, ckv, *lists[:3], q_variable_block_sizes_list=lists[3])
    want = call(*packed, cu_q, cu_kv)
    extra = lambda t, n: randn(gen, n, *t.shape[1:], device="cpu")  # noqa: E731
    assert torch.equal(call(*(torch.cat([t, extra(t, 5)]) for t in packed), cu_q, cu_kv), want)
    got = call(*(torch.cat([extra(t, 3), t]) for t in packed), cu_q + 3, cu_kv + 3)
    assert got.shape == (int(cu_q[-1]) + 3, *want.shape[1:])
    assert torch.equal(got[3:], want) and not got[:3].any()
    with pytest.raises(ValueError, match="'cu_seqlens_kv'.*k's"):  # past the tokens
        call(*packed, cu_q, cu_kv + 1)
    with pytest.raises(ValueError, match="'cu_seqlens_q'.*non-decreasing"):
        call(*packed, cu_q.flip(0), cu_kv)
    with pytest.raises(ValueError, match="'cu_seqlens_q'.*N >= 1"):
        call(*packed, cu_q[:1], cu_kv)


@pytest.mark.parametrize("change,argument", [
    (lambda a: {**a, "cu_seqlens_kv": a["cu_seqlens_kv"][-1]}, "'cu_seqlens_kv"),
    (lambda a: {**a, "cu_seqlens_q": a["cu_seqlens_q"].float()}, "'cu_seqlens_q.dtype'"),
    (lambda a: {**a, "variable_block_sizes_list": [a["variable_block_sizes_list"][0].float()]},
     "'variable_block_sizes_list[0].dtype'"),
    (lambda a: {**a, "variable_block_sizes_list": [a["variable_block_sizes_list"][0][None]]},
     "'variable_block_sizes_list[0].shape'"),
    (lambda a: {**a, "q_variable_block_sizes_list": [a["q_variable_block_sizes_list"][0].double()]},
     "'q_variable_block_sizes_list[0].dtype'"),
], ids=["0-d kv offsets", "float offsets", "float block sizes", "2-D block sizes", "float query block sizes"])
def test_fastvideo_varlen_names_bad_host_metadata(gen, change, argument):
    # The offsets and block sizes are read on the host with tolist(): a 0-d, 2-D or float one
    # failed there or in the binding with a TypeError ('object of type 'int' has no len()',
    # 'slice indices must be integers', 'incompatible function arguments').
    (q, k, v, idx, num, vbs, q_vbs), = fastvideo_varlen_case(gen, "cpu", [(2, 2)])
    args = dict(cu_seqlens_q=torch.tensor([0, q.shape[0]]), cu_seqlens_kv=torch.tensor([0, k.shape[0]]),
                q2k_idx_list=[idx], q2k_num_list=[num], variable_block_sizes_list=[vbs],
                q_variable_block_sizes_list=[q_vbs])
    fk.block_sparse_attn_varlen(q, k, v, **args)  # the unchanged call runs
    with pytest.raises(ValueError) as info:
        fk.block_sparse_attn_varlen(q, k, v, **change(args))
    assert argument in str(info.value) and "expected" in str(info.value), str(info.value)


@pytest.mark.parametrize("name", ["q", "k", "v"])
def test_fastvideo_varlen_names_tokens_of_another_rank(gen, name):
    # Tokens are [total, H, D]: one of rank 2 raised IndexError ('tuple index out of range') where
    # the tokens were packed, and a q of rank 4 was named through cu_seqlens_q ('within q's 1 rows').
    (q, k, v, idx, num, vbs, q_vbs), = fastvideo_varlen_case(gen, "cpu", [(2, 2)])
    tokens = dict(q=q, k=k, v=v)
    for bad in (tokens[name][..., 0], tokens[name][None]):
        args = {**tokens, name: bad}
        with pytest.raises(ValueError, match=f"'{name}.shape'"):
            fk.block_sparse_attn_varlen(args["q"], args["k"], args["v"], torch.tensor([0, q.shape[0]]),
                                        torch.tensor([0, k.shape[0]]), [idx], [num], [vbs], [q_vbs])


# ---- vsa_utils ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,tile", [((9, 10, 7), (4, 4, 4)), ((6, 8, 16), (2, 4, 8)), ((5, 17, 9), (4, 8, 8))])
def test_vsa_utils_match_a_plain_tiling(shape, tile):
    t, h, w = torch.meshgrid(*(torch.arange(n) for n in shape), indexing="ij")
    counts = [math.ceil(n / s) for n, s in zip(shape, tile)]
    tile_id = ((t // tile[0]) * counts[1] + h // tile[1]) * counts[2] + w // tile[2]
    order = torch.sort(tile_id.flatten(), stable=True).indices  # tiles in order, raster inside each
    sizes = torch.bincount(tile_id.flatten(), minlength=math.prod(counts))
    meta = fk.build_vsa_metadata(shape, tile, device="cpu")
    assert torch.equal(meta["tile_partition_indices"], order)
    assert torch.equal(meta["reverse_tile_partition_indices"], torch.argsort(order))
    assert torch.equal(meta["variable_block_sizes"], sizes.int())
    assert meta["variable_block_sizes"].dtype == torch.int32 and meta["tile_partition_indices"].dtype == torch.int64
    slots = torch.arange(math.prod(tile))
    assert torch.equal(meta["non_pad_index"], (torch.arange(len(sizes))[:, None] * math.prod(tile) + slots)
                       [slots < sizes[:, None]])
    assert meta["num_tiles"] == tuple(counts) and meta["max_block_size"] == math.prod(tile)
    assert torch.equal(fk.construct_variable_block_sizes(shape, tuple(counts), torch.device("cpu"), tile),
                       sizes.int())
    with pytest.raises(ValueError, match="'num_tiles'"):
        fk.construct_variable_block_sizes(shape, (1, 1, 1), torch.device("cpu"), tile)


@pytest.mark.parametrize("sizes,block,argument", [
    (torch.tensor([64.0, 10.0]), 64, "'variable_block_sizes.dtype'"),
    (torch.tensor([[64, 10]]), 64, "'variable_block_sizes.shape'"),
    (torch.tensor(5), 64, "'variable_block_sizes.shape'"),
    (torch.tensor([64, 70]), 64, "'variable_block_sizes'"),
    (torch.tensor([64, 10]), 64.5, "'max_block_size'"),
    (torch.tensor([64, 10]), 0, "'max_block_size'"),
], ids=["float", "2-D", "0-d", "past the block", "fractional block", "block 0"])
def test_get_non_pad_index_names_bad_arguments(sizes, block, argument):
    # The sizes went to the binding as tolist() gave them: a float, 2-D or 0-d tensor failed
    # with its TypeError ('incompatible function arguments'), and int() made a block of 64.5 64.
    want = torch.cat([b * 64 + torch.arange(n) for b, n in enumerate([64, 10])])
    assert torch.equal(fk.get_non_pad_index(torch.tensor([64, 10]), 64), want)
    with pytest.raises(ValueError, match=argument):
        fk.get_non_pad_index(sizes, block)
