"""VSA attention for diffusers' Wan transformer (Wan2.1, Wan2.2: WanTransformer3DModel).

    import vsa.integrations.diffusers as vsa_diffusers
    handle = vsa_diffusers.install(pipe, sparsity=0.9)   # or a WanTransformer3DModel
    video = pipe(prompt, ...).frames                      # self-attention runs on vsa
    handle.remove()                                       # the model's own processors again

install() gives every self-attention module (`attn1` of each block) a
VSAWanAttnProcessor; cross-attention to the text (and image) stays diffusers' own,
dense. A forward pre-hook on the transformer reads the latent's patch grid (T, H, W)
from its input [B, C, F, H, W] and its patch size, and hands it to the processors of
that model: the grid is what tiles the tokens into VSA blocks.

Modes (vsa.integrations.grid_attention): "vsa" (coarse + top-k fine + gate; the gate
comes from the attention module's `to_gate_compress` linear where a VSA-trained
checkpoint has one), "fine" (the top-k fine stage alone), "dense" (every block, i.e.
dense attention through vsa's kernel: outputs match the default processor's).

Written against diffusers 0.42.1, the version pinned by the `diffusers` extra
(`pip install "vsa-attention[diffusers]"`): its attention modules call
`processor(attn, hidden_states, encoder_hidden_states, attention_mask, rotary_emb)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import torch
from torch import Tensor

from vsa import UnsupportedError
from vsa.integrations.grid_attention import check_settings, grid_attention
from vsa.metadata import VSAMetadata, build_vsa_metadata

try:
    from diffusers.models.transformers.transformer_wan import WanTransformer3DModel
except ImportError as missing:
    raise ImportError(
        f"vsa.integrations.diffusers needs diffusers ({missing}): "
        "pip install \"vsa-attention[diffusers]\" installs the pinned version") from missing


@dataclass
class LatentGrid:
    """The patch grid (T, H, W) of the latent the transformer is processing and its VSA
    tiling; set by install()'s forward pre-hook, read by that model's processors.

    The tiling is built in the hook, before the blocks run, so that compiled blocks
    (diffusers' compile_repeated_blocks, torch.compile of a block, fullgraph or not)
    only read it. Building it is host work dynamo cannot trace: a torch.compile of the
    whole model breaks its graph there, once per forward, before the first block.
    """

    tile_size: tuple[int, int, int] = (4, 4, 4)
    shape: Optional[tuple[int, int, int]] = None
    metadata: Optional[VSAMetadata] = None

    @torch.compiler.disable
    def set(self, shape: tuple[int, int, int], device: torch.device) -> None:
        self.shape = shape
        self.metadata = build_vsa_metadata(shape, self.tile_size, device=device)


def _apply_wan_rotary(x: Tensor, freqs_cos: Tensor, freqs_sin: Tensor) -> Tensor:
    """Wan's rotary embedding on x [B, S, heads, D]: each (even, odd) channel pair turns
    by the angle whose cos / sin the model's rope gives ([1, S, 1, D], every value
    written twice, once per channel of its pair). The arithmetic runs in the rope's
    dtype, as diffusers' processor does, so both give the same bits."""
    pairs = x.unflatten(-1, (-1, 2))
    even, odd = pairs[..., 0], pairs[..., 1]
    cos, sin = freqs_cos[..., 0::2], freqs_sin[..., 0::2]
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return rotated.flatten(-2).to(x.dtype)


def _projections(attn, hidden_states: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    if getattr(attn, "fused_projections", False):
        return attn.to_qkv(hidden_states).chunk(3, dim=-1)
    return attn.to_q(hidden_states), attn.to_k(hidden_states), attn.to_v(hidden_states)


class VSAWanAttnProcessor:
    """A diffusers attention processor for the self-attention of Wan's blocks.

    topk (KV blocks per query block) or sparsity (fraction of blocks skipped, e.g.
    0.9 as FastVideo's VSA_sparsity) sets "vsa" and "fine"; the grid, shared with
    install()'s hook, carries the tile shape. Made by install().
    """

    def __init__(self, grid: LatentGrid, *, mode: str = "vsa", topk: Optional[int] = None,
                 sparsity: Optional[float] = None):
        check_settings(mode, topk, sparsity, grid.tile_size)
        self.grid = grid
        self.mode = mode
        self.topk = topk
        self.sparsity = sparsity

    def __call__(self, attn, hidden_states: Tensor, encoder_hidden_states: Optional[Tensor] = None,
                 attention_mask: Optional[Tensor] = None, rotary_emb=None, **kwargs) -> Tensor:
        if encoder_hidden_states is not None or getattr(attn, "is_cross_attention", False):
            raise UnsupportedError("VSAWanAttnProcessor: cross-attention is not tiled into VSA "
                                   "blocks; install() sets it on self-attention only")
        if attention_mask is not None:
            raise UnsupportedError("VSAWanAttnProcessor: an attention_mask is not supported "
                                   "(Wan's self-attention passes none)")
        if self.grid.metadata is None:
            raise RuntimeError("VSAWanAttnProcessor: the latent grid is unknown; it is set when "
                               "the WanTransformer3DModel that install() hooked runs its forward")
        query, key, value = _projections(attn, hidden_states)
        query, key = attn.norm_q(query), attn.norm_k(key)
        query, key, value = (x.unflatten(2, (attn.heads, -1)) for x in (query, key, value))
        if rotary_emb is not None:
            query, key = (_apply_wan_rotary(x, *rotary_emb) for x in (query, key))
        gate = None
        if self.mode == "vsa" and getattr(attn, "to_gate_compress", None) is not None:
            gate = attn.to_gate_compress(hidden_states).unflatten(2, (attn.heads, -1))
        out = grid_attention(query, key, value, self.grid.metadata, mode=self.mode, topk=self.topk,
                             sparsity=self.sparsity, tile_size=self.grid.tile_size, gate=gate)
        out = out.flatten(2, 3).type_as(query)
        return attn.to_out[1](attn.to_out[0](out))


# The model's grid, which its processors share: an attribute of the model, so that a copy of
# the model (copy.deepcopy: an EMA or teacher copy) has its own, shared by its own processors.
_GRID_ATTRIBUTE = "_vsa_latent_grid"


@dataclass
class Installation:
    """What install() changed, so that remove() can put it back."""

    processors: dict = field(default_factory=dict)  # attention module -> its previous processor
    hooks: list = field(default_factory=list)
    models: list = field(default_factory=list)  # each holds its grid as an attribute

    def remove(self) -> None:
        for module, processor in self.processors.items():
            module.set_processor(processor)
        for hook in self.hooks:
            hook.remove()
        for model in self.models:
            if hasattr(model, _GRID_ATTRIBUTE):
                delattr(model, _GRID_ATTRIBUTE)
        self.processors.clear()
        self.hooks.clear()
        self.models.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _transformers(target) -> list:
    if isinstance(target, WanTransformer3DModel):
        return [target]
    components = getattr(target, "components", None)
    if isinstance(components, dict):  # a DiffusionPipeline (Wan2.2's holds two transformers)
        found = [c for c in components.values() if isinstance(c, WanTransformer3DModel)]
        if found:
            return found
    raise TypeError(f"vsa.integrations.diffusers.install: expected a WanTransformer3DModel or a "
                    f"pipeline holding one, got {type(target).__name__}")


def _record_grid(model, args, kwargs) -> None:
    latent = args[0] if args else kwargs["hidden_states"]
    frames, height, width = latent.shape[2:]
    p_t, p_h, p_w = model.config.patch_size
    getattr(model, _GRID_ATTRIBUTE).set((frames // p_t, height // p_h, width // p_w), latent.device)


def install(target, *, mode: str = "vsa", topk: Optional[int] = None,
            sparsity: Optional[float] = None, tile_size: Sequence[int] = (4, 4, 4)) -> Installation:
    """Run the self-attention of every WanTransformer3DModel in `target` (the model, or a
    pipeline) on vsa; returns an Installation whose remove() undoes it.

    mode "vsa" | "fine" | "dense" (module docstring); topk or sparsity as in
    VSAWanAttnProcessor (neither: every block; refused in "dense").
    """
    check_settings(mode, topk, sparsity, tile_size)
    models = _transformers(target)
    for model in models:  # refused before any model is changed
        head_dim = getattr(model.config, "attention_head_dim", None)
        if head_dim not in (64, 128):
            raise UnsupportedError(f"vsa.integrations.diffusers.install: vsa runs head dims 64 and 128, "
                                   f"this model's attention_head_dim is {head_dim}")
        if any(isinstance(block.attn1.processor, VSAWanAttnProcessor) for block in model.blocks):
            raise ValueError("vsa.integrations.diffusers.install: the model already runs on vsa; "
                             "remove() the earlier installation first")
    installation = Installation()
    for model in models:
        grid = LatentGrid(tuple(tile_size))
        setattr(model, _GRID_ATTRIBUTE, grid)
        processor = VSAWanAttnProcessor(grid, mode=mode, topk=topk, sparsity=sparsity)
        hook = model.register_forward_pre_hook(_record_grid, with_kwargs=True)
        installation.hooks.append(hook)
        installation.models.append(model)
        for block in model.blocks:
            installation.processors[block.attn1] = block.attn1.processor
            block.attn1.set_processor(processor)
    return installation
