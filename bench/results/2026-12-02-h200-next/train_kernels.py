"""Where the layer's forward + backward spends its GPU time: torch.profiler over 10 training steps
of video_sparse_attn on Wan 480p (the graph_times.py inputs), kernels summed by name, µs per step."""
import torch
from torch.profiler import ProfilerActivity, profile

import vsa
from vsa.bench.cases import CASES
from vsa.bench.inputs import case_inputs, zero_pad_tokens

case = CASES["wan2.1-1.3b-480p"]
blocks, sets, _ = case_inputs(case, torch.bfloat16, torch.device("cuda", 0), 0)
q, k, v = zero_pad_tokens(sets[0], blocks.non_pad_index)[:3]
vbs = blocks.variable_block_sizes
leaves = [x.detach().requires_grad_() for x in (q, k, v)]
dout = torch.randn_like(q)


def step():
    out = vsa.video_sparse_attn(*leaves, vbs, vbs, case.topk, block_size=case.block_size)
    torch.autograd.backward(out, dout)


for _ in range(3):
    step()
torch.cuda.synchronize()
steps = 10
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
totals = {}
for e in prof.events():
    if e.device_type == torch.autograd.DeviceType.CUDA:
        totals[e.name] = totals.get(e.name, 0.0) + e.device_time
total = sum(totals.values())
for name, t in sorted(totals.items(), key=lambda kv: -kv[1]):
    print(f"{t / steps:9.1f} us  {name[:110]}")
print(f"{total / steps:9.1f} us  all kernels per step")
