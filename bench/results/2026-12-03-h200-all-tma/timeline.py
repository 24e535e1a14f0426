"""The CUDA backward's launches on the device's own clock (CUPTI through torch.profiler), with
the host kept ahead as in `vsa bench`: per kernel of one call, its duration and the idle gap
before it, averaged over the profiled calls, and the call's span from its first kernel's start
to its last kernel's end; then the host's side of the same calls: the CUDA runtime calls and
the ops that took the most host time per call (a call that waits for the device shows here as
one long runtime call). Wan 2.1 480p (B1 H12, 624 blocks, top-k 63, the latent's partial
blocks), random lists; `--q-padding` also passes the queries' block sizes, as the layer does.

    python3 timeline.py [--q-padding] [--calls 6]
"""
import argparse
import collections

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import vsa

parser = argparse.ArgumentParser()
parser.add_argument("--q-padding", action="store_true")
parser.add_argument("--calls", type=int, default=6)
args = parser.parse_args()

dev = torch.device("cuda")
gen = torch.Generator(dev).manual_seed(0)
meta = vsa.build_vsa_metadata((21, 30, 52), tile_size=(4, 4, 4), device=dev)
vbs = meta.variable_block_sizes
nb, heads, d, topk = vbs.numel(), 12, 128, 63
shape = (1, heads, nb * 64, d)
q, k, v = (torch.randn(shape, generator=gen, device=dev).to(torch.bfloat16).requires_grad_()
           for _ in range(3))
scores = torch.rand((1, heads, nb, nb), generator=gen, device=dev)
idx = scores.topk(topk, dim=-1).indices.sort(dim=-1).values.to(torch.int32)
num = torch.full((1, heads, nb), topk, dtype=torch.int32, device=dev)
out, _ = vsa.block_sparse_attn(q, k, v, idx, num, vbs,
                               q_variable_block_sizes=vbs if args.q_padding else None)
grad = torch.randn_like(out)


def call():
    torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)


for _ in range(5):
    call()
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(args.calls):
        call()
    torch.cuda.synchronize()
ran = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA),
             key=lambda e: e.time_range.start)
per_call = len(ran) // args.calls
dur, gap = collections.defaultdict(float), collections.defaultdict(float)
spans, names = [], []
for c in range(args.calls):
    one = ran[c * per_call:(c + 1) * per_call]
    spans.append((one[-1].time_range.end - one[0].time_range.start) / 1e3)
    for i, e in enumerate(one):
        key = (i, e.name[:70])
        if c == 0:
            names.append(key)
        dur[key] += e.time_range.elapsed_us() / args.calls
        if i:
            gap[key] += (e.time_range.start - one[i - 1].time_range.end) / args.calls
print(f"q padding {args.q_padding}: {per_call} launches a call; span of a call (ms): "
      + ", ".join(f"{s:.3f}" for s in spans))
print(f"{'gap before, us':>15} {'duration, us':>13}  kernel")
for key in names:
    print(f"{gap[key]:15.1f} {dur[key]:13.1f}  {key[1]}")
print(f"sum of durations {sum(dur.values()) / 1e3:.3f} ms, of gaps {sum(gap.values()) / 1e3:.3f} ms")

host = collections.defaultdict(lambda: [0, 0.0])
for e in prof.events():
    if e.device_type == DeviceType.CPU:
        host[e.name][0] += 1
        host[e.name][1] += e.self_cpu_time_total
print(f"{'host us/call':>12} {'calls/call':>10}  host op or CUDA runtime call (self time)")
for name, (count, us) in sorted(host.items(), key=lambda kv: -kv[1][1])[:25]:
    print(f"{us / args.calls:12.1f} {count / args.calls:10.1f}  {name[:90]}")
