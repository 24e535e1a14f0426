"""Times each stage of vsa.video_sparse_attn on one GPU, and the layer against its fine
kernel alone (the goals of docs/layer.md: forward <= 1.10 x the fine kernel, forward +
backward <= 7.5 ms on Wan 480p).

    python bench/layer/layer_stages.py                       # Wan2.1 480p: B1 H12, 624 blocks, top-k 63
    python bench/layer/layer_stages.py --latent 30 48 80 --heads 24 --topk 192   # HunyuanVideo 720p
    VSA_COARSE_ROWS=32 python bench/layer/layer_stages.py    # another coarse-stage CTA shape

Median of --iters runs with CUDA events, inputs rotated so operands are not left in L2.
"""

from __future__ import annotations

import argparse

import torch

import vsa
from vsa.bench.timing import median_ms, rotation_count
from vsa.layer import block_means, coarse_stage, fine_stage, fine_stage_gated, gate_combine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latent", type=int, nargs=3, default=(21, 30, 52), metavar=("T", "H", "W"))
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--kv-heads", type=int, default=None)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--topk", type=int, default=63)
    parser.add_argument("--no-gate", action="store_true")
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--device", default="cuda", help="cuda, or cpu for a quick check of the script")
    args = parser.parse_args()

    device = torch.device(args.device)
    meta = vsa.build_vsa_metadata(tuple(args.latent), device=device)
    vbs = meta.variable_block_sizes  # also the query blocks' (self-attention), as the layer passes it
    kv_heads = args.kv_heads or args.heads
    shape = (1, args.heads, meta.padded_length, args.head_dim)
    kv_shape = (1, kv_heads, meta.padded_length, args.head_dim)
    per_set = 4 * torch.Size(shape).numel() * 2
    sets = []
    for _ in range(rotation_count(per_set, device)):
        q = torch.randn(shape, device=device, dtype=torch.bfloat16)
        k, v = (torch.randn(kv_shape, device=device, dtype=torch.bfloat16) for _ in range(2))
        gate = None if args.no_gate else torch.rand(shape, device=device, dtype=torch.bfloat16)
        means = block_means(q, k, v, vbs, vbs)
        coarse, idx, num = coarse_stage(*means, vbs, args.topk)
        fine = fine_stage(q, k, v, idx, num, vbs, q_variable_block_sizes=vbs)
        sets.append(dict(q=q, k=k, v=v, gate=gate, means=means, coarse=coarse, idx=idx, num=num, fine=fine))

    def timed(fn) -> float:
        return median_ms([lambda s=s: fn(s) for s in sets], warmup=5, iters=args.iters, device=device)

    def layer(s):
        return vsa.video_sparse_attn(s["q"], s["k"], s["v"], vbs, vbs, args.topk, gate=s["gate"])

    def with_grad(fn):
        def run(s):
            leaves = {n: s[n].detach().requires_grad_() for n in ("q", "k", "v")}
            fn({**s, **leaves}).backward(s["q"])  # any q-shaped tensor serves as dout
        return run

    rows = []
    with torch.no_grad():
        rows += [
            ("block means (q, k, v)", timed(lambda s: block_means(s["q"], s["k"], s["v"], vbs, vbs))),
            ("coarse stage", timed(lambda s: coarse_stage(*s["means"], vbs, args.topk))),
            ("fine stage", timed(lambda s: fine_stage(s["q"], s["k"], s["v"], s["idx"], s["num"], vbs, q_variable_block_sizes=vbs))),
            ("gate combine", timed(lambda s: gate_combine(s["fine"], s["coarse"], s["gate"]))),
            # What the layer forward runs without a gradient: the combine in the fine epilogue.
            ("fine stage + combine, fused", timed(lambda s: fine_stage_gated(
                s["q"], s["k"], s["v"], s["idx"], s["num"], vbs, s["coarse"], s["gate"],
                q_variable_block_sizes=vbs))),
            ("layer forward", timed(layer)),
        ]
    fine_fb = timed(with_grad(lambda s: fine_stage(s["q"], s["k"], s["v"], s["idx"], s["num"], vbs, q_variable_block_sizes=vbs)))
    layer_fb = timed(with_grad(layer))
    rows += [("fine stage forward + backward", fine_fb), ("layer forward + backward", layer_fb)]

    print(f"latent {tuple(args.latent)}: {meta.num_tiles} blocks, B1 H{args.heads} Hkv{kv_heads} "
          f"D{args.head_dim} top-k {args.topk}, gate {not args.no_gate}, "
          f"{torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}")
    for name, ms in rows:
        print(f"  {name:32s} {ms * 1e3:9.1f} us")
    times = dict(rows)
    print(f"  layer forward / fine stage       {times['layer forward'] / times['fine stage']:9.3f} x")
    print(f"  layer fwd+bwd / fine fwd+bwd     {layer_fb / fine_fb:9.3f} x")


if __name__ == "__main__":
    main()
