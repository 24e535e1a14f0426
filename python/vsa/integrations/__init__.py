"""vsa inside other libraries' models.

- vsa.integrations.grid_attention: VSA self-attention over the raster tokens of a
  (T, H, W) video latent (tiling, the layer, untiling), free of any framework.
- vsa.integrations.diffusers: an attention processor for diffusers' Wan transformer
  and install() to put it on a model or pipeline (needs the `diffusers` extra).
"""
