"""Does the host fall behind the device in a CUDA backward call? Wan 2.1 480p (B1 H12, 624
blocks, top-k 63, the latent's partial blocks, random lists): the host time of 10 calls issued
back to back without waiting (a call that waits for the device makes that time about the
device's), then the device time of the same 10, for three ways of calling: autograd, the op,
and vsa._C.backward with its workspace made once. Then the host's most expensive ops and CUDA
runtime calls in one autograd call (torch.profiler).

    python3 host_probe.py
"""
import collections
import time

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
qd, kd, vd, od = q.detach(), k.detach(), v.detach(), out.detach()
dq, dk, dv = torch.empty_like(qd), torch.empty_like(kd), torch.empty_like(vd)
arrays = (qd, kd, vd, idx, num, vbs, None, od, lse, dout)
ws = torch.empty(_C.backward_workspace_bytes(*arrays, dq, dk, dv, "bhsd", scale, False), dtype=torch.uint8, device=dev)
stream = torch.cuda.current_stream().cuda_stream

ways = {
    "autograd": lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True),
    "op": lambda: torch.ops.vsa.backward(dout, qd, kd, vd, od, lse, idx, num, vbs, None, scale, "bhsd", False),
    "_C": lambda: _C.backward(*arrays, None, None, None, ws, dq, dk, dv, "bhsd", scale, False, stream),
}
for name, call in ways.items():
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    for _ in range(10):
        call()
    end.record()
    host = (time.perf_counter() - t0) * 1e3 / 10
    end.synchronize()
    print(f"{name:9}: host {host:.3f} ms a call issued, device {start.elapsed_time(end) / 10:.3f} ms a call")

with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(3):
        ways["autograd"]()
    torch.cuda.synchronize()
host = collections.defaultdict(lambda: [0, 0.0])
for e in prof.events():
    if e.device_type == DeviceType.CPU:
        host[e.name][0] += 1
        host[e.name][1] += e.self_cpu_time_total
print(f"{'host us/call':>12} {'calls/call':>10}  host op or CUDA runtime call (self time), autograd")
for name, (count, us) in sorted(host.items(), key=lambda kv: -kv[1][1])[:22]:
    print(f"{us / 3:12.1f} {count / 3:10.1f}  {name[:90]}")
