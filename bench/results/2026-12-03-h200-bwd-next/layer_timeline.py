"""The VSA layer's training step (forward + backward of vsa.video_sparse_attn, no gate, as
`vsa bench --op layer` times it) on the device's own clock: CUPTI through torch.profiler with
CUDA activity only (profiling the host as well showed idle time that was the profiler's own;
kernel-notes, "Where a backward call's time goes"). Per launch of one step, its duration and the
idle gap before it, averaged over the profiled steps, and the step's span. Wan 2.1 480p (B1 H12,
624 blocks, top-k 63), random inputs with zero pad tokens, as `vsa bench --op layer` runs it.

    python3 layer_timeline.py [--steps 6]
"""
import argparse
import collections

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import vsa

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()

dev = torch.device("cuda")
gen = torch.Generator(dev).manual_seed(0)
meta = vsa.build_vsa_metadata((21, 30, 52), tile_size=(4, 4, 4), device=dev)
vbs = meta.variable_block_sizes
nb, heads, d, topk = vbs.numel(), 12, 128, 63
shape = (1, heads, nb * 64, d)
pad = (torch.arange(64, device=dev)[None, :] >= vbs[:, None]).reshape(-1)  # pad tokens
leaves = []
for _ in range(3):
    t = torch.randn(shape, generator=gen, device=dev)
    t[:, :, pad] = 0
    leaves.append(t.to(torch.bfloat16).requires_grad_())
q, k, v = leaves
grad = torch.randn(shape, generator=gen, device=dev).to(torch.bfloat16)


def step():
    out = vsa.video_sparse_attn(q, k, v, vbs, vbs, topk, 64)
    torch.autograd.grad(out, leaves, grad)


for _ in range(5):
    step()
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
ran = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA),
             key=lambda e: e.time_range.start)
per_step = len(ran) // args.steps
dur, gap = collections.defaultdict(float), collections.defaultdict(float)
spans, names = [], []
for c in range(args.steps):
    one = ran[c * per_step:(c + 1) * per_step]
    spans.append((one[-1].time_range.end - one[0].time_range.start) / 1e3)
    for i, e in enumerate(one):
        key = (i, e.name[:80])
        if c == 0:
            names.append(key)
        dur[key] += e.time_range.elapsed_us() / args.steps
        if i:
            gap[key] += (e.time_range.start - one[i - 1].time_range.end) / args.steps
print(f"{per_step} launches a step; span of a step (ms): " + ", ".join(f"{s:.3f}" for s in spans))
print(f"{'gap before, us':>15} {'duration, us':>13}  kernel")
for key in names:
    print(f"{gap[key]:15.1f} {dur[key]:13.1f}  {key[1]}")
print(f"sum of durations {sum(dur.values()) / 1e3:.3f} ms, of gaps {sum(gap.values()) / 1e3:.3f} ms")
