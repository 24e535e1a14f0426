"""Where call 2's idle device time before the backward's first launch comes from. Wan 2.1 480p
(B1 H12, 624 blocks, top-k 63, the latent's partial blocks, random lists), two ways of calling
the backward back to back: through autograd and straight into vsa._C.backward (its workspace
made once). For each, the launches of one call on the device clock (torch.profiler, 6 calls:
duration and idle gap before each, and the gap from the last call's end), then the device time
per call of 10 calls issued back to back, the two ways alternating over 6 rounds.

    python3 gap_probe.py
"""
import collections
import statistics

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import vsa
from vsa import _C

dev = torch.device("cuda")
gen = torch.Generator(dev).manual_seed(0)
vbs = vsa.build_vsa_metadata((21, 30, 52), tile_size=(4, 4, 4), device=dev).variable_block_sizes
nb, heads = vbs.numel(), 12
shape = (1, heads, nb * 64, 128)
q, k, v = (torch.randn(shape, generator=gen, device=dev).to(torch.bfloat16).requires_grad_() for _ in range(3))
idx = torch.rand((1, heads, nb, nb), generator=gen, device=dev).topk(63, dim=-1).indices.sort(dim=-1).values
idx = idx.to(torch.int32)
num = torch.full((1, heads, nb), 63, dtype=torch.int32, device=dev)
out, lse = vsa.block_sparse_attn(q, k, v, idx, num, vbs)
dout = torch.randn_like(out)
scale = 128 ** -0.5
dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
arrays = (q.detach(), k.detach(), v.detach(), idx, num, vbs, None, out.detach(), lse, dout)
ws = torch.empty(_C.backward_workspace_bytes(*arrays, dq, dk, dv, "bhsd", scale, False), dtype=torch.uint8,
                 device=dev)
stream = torch.cuda.current_stream().cuda_stream
ways = {
    "autograd": lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True),
    "_C": lambda: _C.backward(*arrays, None, None, None, ws, dq, dk, dv, "bhsd", scale, False, stream),
}
calls = 6
for name, call in ways.items():
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    ran = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA), key=lambda e: e.time_range.start)
    per_call = len(ran) // calls
    dur, gap = collections.defaultdict(float), collections.defaultdict(float)
    for i, e in enumerate(ran[per_call:], start=per_call):  # calls 2..6: each has a call before it
        key = (i % per_call, e.name[:60])
        dur[key] += e.time_range.elapsed_us() / (calls - 1)
        gap[key] += (e.time_range.start - ran[i - 1].time_range.end) / (calls - 1)
    print(f"{name}: {per_call} launches a call; gap before (us), duration (us), kernel")
    for key in sorted(dur):
        print(f"  {gap[key]:8.1f} {dur[key]:9.1f}  {key[1]}")
    print(f"  sum: gaps {sum(gap.values()):.1f} us, durations {sum(dur.values()) / 1e3:.3f} ms")
times = collections.defaultdict(list)
for _ in range(6):
    for name, call in ways.items():
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            call()
        end.record()
        end.synchronize()
        times[name].append(start.elapsed_time(end) / 10)
for name, t in times.items():
    print(f"{name:9}: device ms a call, 10 back to back, 6 rounds alternating: median {statistics.median(t):.3f} "
          f"({', '.join(f'{x:.3f}' for x in t)})")
