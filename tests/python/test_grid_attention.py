"""vsa.integrations.grid_attention: VSA self-attention of raster tokens on a (T, H, W)
grid, against a float64 token-level reference (grid_reference.py) in every mode, with
partial tiles, batch 2, a gate, 128-token tiles; settings and shape errors."""

import re

import numpy as np
import pytest
import torch

import vsa
from vsa.integrations.grid_attention import grid_attention, resolve_topk
from attention_reference import rel_error
from grid_reference import reference_grid_attention

DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
    not vsa.cuda_compiled(), reason="built without CUDA kernels")])]


def draw(gen, grid, *, batch=2, heads=2, dim=64, gated=False):
    tokens = grid[0] * grid[1] * grid[2]
    q, k, v = (torch.randn(batch, tokens, heads, dim, generator=gen) for _ in range(3))
    gate = torch.rand(batch, tokens, heads, dim, generator=gen) if gated else None
    return q, k, v, gate


CASES = [
    dict(mode="dense"),
    dict(mode="fine", topk=3),
    dict(mode="vsa", topk=2),
    dict(mode="vsa", topk=3, gated=True),
    dict(mode="fine", topk=2, tile_size=(2, 8, 8), grid=(3, 9, 10)),  # 128-token blocks
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_matches_token_level_reference(gen, device, case):
    case = dict(case)
    grid, tile_size = case.pop("grid", (5, 6, 7)), case.pop("tile_size", (4, 4, 4))
    gated, mode, topk = case.pop("gated", False), case.pop("mode"), case.pop("topk", None)
    # fp32 on the CPU backend; bf16 on CUDA (its dtypes), with bf16 tolerance.
    dtype, tolerance = (torch.float32, 1e-5) if device == "cpu" else (torch.bfloat16, 1e-2)
    for _ in range(20):  # a draw whose top-k boundary is clear in every row (no near-ties)
        q, k, v, gate = draw(gen, grid, gated=gated)
        cast = [x if x is None else x.to(dtype) for x in (q, k, v, gate)]
        want, margin = reference_grid_attention(*cast[:3], grid, mode=mode, topk=topk,
                                                tile_size=tile_size, gate=cast[3])
        if margin > 1e-3:
            break
    args = [x if x is None else x.to(device) for x in cast]
    got = grid_attention(*args[:3], grid, mode=mode, topk=topk, tile_size=tile_size, gate=args[3])
    assert got.shape == q.shape and got.dtype == dtype
    assert rel_error(got.cpu(), want) <= tolerance


def test_topk_from_sparsity():
    assert resolve_topk(624, None, 0.9) == 63  # FastVideo's Wan 480p setting
    assert resolve_topk(624, None, None) == 624
    assert resolve_topk(10, 25, None) == 10
    assert resolve_topk(10, None, 0.999) == 1


@pytest.mark.parametrize("settings, named", [
    (dict(mode="sparse"), "mode"),
    (dict(mode="fine", topk=0), "topk"),
    (dict(mode="fine", topk=2.5), "topk"),
    (dict(mode="fine", topk=True), "topk"),
    (dict(mode="vsa", sparsity="0.5"), "sparsity"),  # raised TypeError from the range check
    (dict(mode="vsa", sparsity=True), "sparsity"),
    (dict(mode="vsa", sparsity=1.0), "sparsity"),
    (dict(mode="vsa", topk=2, sparsity=0.5), "topk / sparsity"),
    (dict(mode="dense", topk=2), "topk / sparsity"),
    (dict(mode="fine", tile_size=(4, 4, 2)), "tile_size"),
])
def test_bad_settings_are_named(gen, settings, named):
    q, k, v, _ = draw(gen, (4, 4, 4), batch=1)
    with pytest.raises(ValueError, match=f"invalid argument '{named}'"):
        grid_attention(q, k, v, (4, 4, 4), **settings)


@pytest.mark.parametrize("topk", [np.int64(1), torch.tensor(1)], ids=repr)
def test_topk_of_any_integer_type(gen, topk):
    # Refused as no int, where video_sparse_attn (and the compat layer) take any integer count.
    q, k, v, _ = draw(gen, (4, 4, 4), batch=1)
    assert torch.equal(grid_attention(q, k, v, (4, 4, 4), mode="fine", topk=topk),
                       grid_attention(q, k, v, (4, 4, 4), mode="fine", topk=1))


def test_tokens_must_fill_the_grid(gen):
    q, k, v, gate = draw(gen, (4, 4, 4), batch=1, gated=True)
    with pytest.raises(ValueError, match=r"'q.shape\[1\]': expected T·H·W = 80 tokens"):
        grid_attention(q, k, v, (5, 4, 4), mode="dense")
    with pytest.raises(ValueError, match="'gate'"):
        grid_attention(q, k, v, (4, 4, 4), mode="fine", topk=1, gate=gate)
    # k, v and gate named by their own lengths (they were tiled as 'x').
    for name, change in (("k", dict(k=k[:, :7])), ("v", dict(v=v[:, :32])), ("gate", dict(gate=gate[:, :32]))):
        args = dict(q=q, k=k, v=v, gate=gate) | change
        with pytest.raises(ValueError, match=rf"'{name}.shape\[1\]': expected T·H·W = 64 tokens"):
            grid_attention(args["q"], args["k"], args["v"], (4, 4, 4), mode="vsa", topk=1, gate=args["gate"])


def test_a_gate_unlike_q_is_named_by_its_own_shape(gen):
    # The layer named it by its tiled shape: 'got [1, 64, 2, 32]' for a gate [1, 48, 2, 32].
    q, k, v, gate = draw(gen, (3, 4, 4), batch=1, gated=True)
    for bad in (gate[..., :32], gate[:, :, :1]):
        with pytest.raises(ValueError, match=r"'gate\.shape': expected \[1, 48, 2, 64\] \(as q\), got "
                                             + re.escape(str(list(bad.shape))) + "$"):
            grid_attention(q, k, v, (3, 4, 4), mode="vsa", topk=1, gate=bad)


@pytest.mark.parametrize("mode", ["vsa", "fine", "dense"])
def test_keys_and_values_unlike_q_are_named(gen, mode):
    # The coarse stage named them through their block means: 'k_mean.shape', 'v_mean.shape'.
    q, k, v, _ = draw(gen, (4, 4, 4), batch=1)
    for k_, v_, name in ((torch.cat([k, k]), torch.cat([v, v]), "k"), (k[:, :, :1], v, "v"),
                         (k, torch.cat([v, v], -1), "v")):
        with pytest.raises(ValueError, match=rf"'{name}\.shape'"):
            grid_attention(q, k_, v_, (4, 4, 4), mode=mode)


@pytest.mark.parametrize("mode", ["vsa", "fine", "dense"])
def test_an_unsupported_head_dim_of_q_is_named_before_k(gen, mode):
    # It was 'k.shape: expected ... head dim 32', pointing at the k of a supported head dim.
    q, k, v, _ = draw(gen, (4, 4, 4), batch=1)
    with pytest.raises(vsa.UnsupportedError, match=r"'q\.shape': .* D = 32"):
        grid_attention(q[..., :32], k, v, (4, 4, 4), mode=mode)


def test_prebuilt_metadata_serves_as_the_grid(gen):
    """What a model hook passes from outside a compiled region: the same result."""
    q, k, v, _ = draw(gen, (5, 6, 7), batch=1)
    meta = vsa.build_vsa_metadata((5, 6, 7), (4, 4, 4))
    want = grid_attention(q, k, v, (5, 6, 7), mode="fine", topk=3)
    assert torch.equal(grid_attention(q, k, v, meta, mode="fine", topk=3), want)
    with pytest.raises(ValueError, match="invalid argument 'tile_size'"):
        grid_attention(q, k, v, meta, mode="fine", topk=3, tile_size=(2, 8, 4))


@pytest.mark.parametrize("mode, topk", [("dense", None), ("fine", 3), ("vsa", 2)])
def test_metadata_of_another_device_serves_the_tokens_device(gen, mode, topk):
    """Metadata built on another device than the tokens' (a model hook that saw the latent before
    it was moved to the block's device: diffusers' device_map, a model split over GPUs) is taken
    as its grid, the tiling on the tokens' device; it raised a device mismatch in tile(). The meta
    device stands in for the other GPU."""
    q, k, v, _ = draw(gen, (5, 6, 7), batch=1)
    elsewhere = vsa.build_vsa_metadata((5, 6, 7), (4, 4, 4), device="meta")
    want = grid_attention(q, k, v, (5, 6, 7), mode=mode, topk=topk)
    assert torch.equal(grid_attention(q, k, v, elsewhere, mode=mode, topk=topk), want)
