"""One denoising step of a Wan2.1-1.3B-shaped diffusers transformer (random weights), with
diffusers' default attention processor (torch SDPA) and with vsa's, in the same run.

    python bench/diffusers/wan_step.py                      # H200: Wan2.1-1.3B, 480p latent, bf16
    python bench/diffusers/wan_step.py --sparsity 0.8 --iters 20
    python bench/diffusers/wan_step.py --tiny --device cpu  # a quick check of the script

The model is WanTransformer3DModel built from Wan2.1-T2V-1.3B's config (30 layers, 12
heads of 128, width 1536, FFN 8960, text width 4096), weights drawn at random (nothing is
downloaded), cast to bf16 except the modules diffusers keeps in full precision (norms, time
embedder, rope), as from_pretrained(torch_dtype=bfloat16) would. Inputs: a 480p video
latent [1, 16, 21, 60, 104] (21 x 30 x 52 = 32,760 tokens after the (1, 2, 2) patch, 624
VSA blocks) and a 512-token text context.

Printed: the median time of one transformer forward per processor (CUDA events, --warmup
runs first), the speed-up over the default, and each output's relative error against the
default's and against the default processor in fp32. The check (exit status 1 if it
fails): "dense" (vsa's kernel, every block) is as accurate against fp32 as the default
(within 1.25x + 1e-3) and every output is finite. The sparse modes' error is what
skipping blocks costs on random weights, not a quality measure: that needs a VSA-trained
model.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import nullcontext

import diffusers
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import vsa.integrations.diffusers as vsa_diffusers
from vsa.bench.timing import median_ms
from vsa.integrations.grid_attention import resolve_topk
from vsa.metadata import build_vsa_metadata

from diffusers import WanTransformer3DModel
from diffusers.utils import logging as diffusers_logging

# Wan2.1-T2V-1.3B's transformer config (the diffusers-format checkpoint's config.json).
WAN21_1_3B = dict(patch_size=(1, 2, 2), num_attention_heads=12, attention_head_dim=128,
                  in_channels=16, out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=8960,
                  num_layers=30, cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6,
                  image_dim=None, added_kv_proj_dim=None, rope_max_seq_len=1024)
TINY = dict(WAN21_1_3B, num_attention_heads=2, attention_head_dim=64, in_channels=4, out_channels=4,
            text_dim=32, freq_dim=32, ffn_dim=128, num_layers=2, rope_max_seq_len=64)


def build_model(config: dict, device: torch.device) -> WanTransformer3DModel:
    torch.manual_seed(0)
    with torch.device(device):
        return WanTransformer3DModel(**config).eval()


def to_bf16(model: WanTransformer3DModel) -> None:
    """Parameters and buffers to bf16, except those of the modules from_pretrained(
    torch_dtype=bfloat16) keeps as they are (norms, time embedder, rope: its float64
    frequencies stay float64)."""
    def kept(name):
        return any(part in model._keep_in_fp32_modules for part in name.split("."))
    for name, module in model.named_modules():
        if kept(name):
            continue
        for tensors in (module._parameters, module._buffers):
            for key, t in tensors.items():
                if t is not None and t.is_floating_point() and not kept(f"{name}.{key}"):
                    t.data = t.data.to(torch.bfloat16)


def rel_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latent", type=int, nargs=3, default=(21, 60, 104),
                        metavar=("F", "H", "W"),
                        help="latent frames, height, width before the (1, 2, 2) patch")
    parser.add_argument("--sparsity", type=float, default=0.9,
                        help="fraction of KV blocks the sparse modes skip "
                             "(FastVideo's VSA_sparsity)")
    parser.add_argument("--text-tokens", type=int, default=512)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="a 2-layer toy model on a small latent")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    diffusers_logging.set_verbosity_error()

    device = torch.device(args.device)
    config = TINY if args.tiny else WAN21_1_3B
    latent_shape = (5, 16, 20) if args.tiny else tuple(args.latent)
    grid = tuple(n // p for n, p in zip(latent_shape, config["patch_size"]))
    num_blocks = build_vsa_metadata(grid, device=device).num_tiles
    gen = torch.Generator(device).manual_seed(1)
    latent = torch.randn((1, config["in_channels"], *latent_shape), generator=gen, device=device)
    text = torch.randn((1, args.text_tokens, config["text_dim"]), generator=gen, device=device)
    timestep = torch.tensor([500], device=device)
    model = build_model(config, device)

    @torch.no_grad()
    def step(dtype):
        return model(latent.to(dtype), timestep, text.to(dtype)).sample

    # The default processor in fp32: what bf16 is judged against. On CUDA, SDPA's
    # memory-efficient kernel (it takes fp32); its math fallback would hold the
    # 12 x 32,760^2 fp32 scores (51 GB) of the 480p case at once.
    with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]) if device.type == "cuda" else nullcontext():
        reference = step(torch.float32)
    to_bf16(model)

    def measure(settings):
        handle = vsa_diffusers.install(model, **settings) if settings else None
        try:
            out = step(torch.bfloat16)
            ms = median_ms([lambda: step(torch.bfloat16)], warmup=args.warmup, iters=args.iters,
                           device=device)
        finally:
            if handle:
                handle.remove()
        return ms, out

    runs = [("default (SDPA)", None), ("vsa dense (every block)", dict(mode="dense")),
            (f"vsa, sparsity {args.sparsity}", dict(mode="vsa", sparsity=args.sparsity)),
            (f"vsa fine only, sparsity {args.sparsity}", dict(mode="fine", sparsity=args.sparsity))]
    results, default_out, base_ms = [], None, None
    for name, settings in runs:
        ms, out = measure(settings)
        if default_out is None:
            default_out, base_ms = out, ms
        row = dict(processor=name, ms=round(ms, 3), speedup=round(base_ms / ms, 3),
                   rel_error_vs_default=rel_error(out, default_out),
                   rel_error_vs_fp32=rel_error(out, reference),
                   finite=bool(torch.isfinite(out).all()))
        results.append(row)
        print(f"{name:<36} {ms:9.2f} ms   speed-up {base_ms / ms:5.2f}x   rel. error vs default "
              f"{row['rel_error_vs_default']:.2e}, vs fp32 {row['rel_error_vs_fp32']:.2e}",
              flush=True)

    # The check: dense through vsa's kernel is as accurate as the default, against fp32.
    default_err, dense_err = results[0]["rel_error_vs_fp32"], results[1]["rel_error_vs_fp32"]
    ok = all(r["finite"] for r in results) and dense_err <= 1.25 * default_err + 1e-3
    print(f"check: dense mode error vs fp32 {dense_err:.2e} <= 1.25 x default's {default_err:.2e} "
          f"+ 1e-3, all outputs finite: {'PASSED' if ok else 'FAILED'}")
    summary = dict(
        device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        torch=torch.__version__, diffusers=diffusers.__version__,
        model="tiny" if args.tiny else "Wan2.1-1.3B config", layers=config["num_layers"],
        latent=latent_shape, token_grid=grid, tokens=grid[0] * grid[1] * grid[2], blocks=num_blocks,
        topk=resolve_topk(num_blocks, None, args.sparsity), dtype="bfloat16", check_passed=ok,
        results=results)
    print(json.dumps(summary))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
