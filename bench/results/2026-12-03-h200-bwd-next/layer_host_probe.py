"""Is the device idle during the VSA layer's training step because the host is behind? Wan 2.1
480p (B1 H12, 624 blocks, top-k 63, no gate), as `vsa bench --op layer` runs it. For 10 steps
issued back to back without waiting: the host's time and the device's (a host that waits for the
device somewhere shows as host time about the device's); the same step captured in one CUDA
graph and replayed (the device's time with no host in the way); whether torch flags a
synchronizing call in a step (torch.cuda.set_sync_debug_mode); then the host ops and CUDA
runtime calls that take the most host time in a step (torch.profiler, CPU activity).

    python3 layer_host_probe.py
"""
import collections
import time
import warnings

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import vsa

dev = torch.device("cuda")
gen = torch.Generator(dev).manual_seed(0)
vbs = vsa.build_vsa_metadata((21, 30, 52), tile_size=(4, 4, 4), device=dev).variable_block_sizes
nb, heads, topk = vbs.numel(), 12, 63
shape = (1, heads, nb * 64, 128)
pad = (torch.arange(64, device=dev)[None, :] >= vbs[:, None]).reshape(-1)
leaves = []
for _ in range(3):
    t = torch.randn(shape, generator=gen, device=dev)
    t[:, :, pad] = 0
    leaves.append(t.to(torch.bfloat16).requires_grad_())
q, k, v = leaves
grad = torch.randn(shape, generator=gen, device=dev).to(torch.bfloat16)


def step():
    out = vsa.video_sparse_attn(q, k, v, vbs, vbs, topk, 64)
    return torch.autograd.grad(out, leaves, grad)


def timed(run, n=10):
    """(host ms, device ms) per run of n runs issued back to back."""
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    for _ in range(n):
        run()
    end.record()
    host = (time.perf_counter() - t0) * 1e3 / n
    torch.cuda.synchronize()
    return host, start.elapsed_time(end) / n


for _ in range(5):
    step()
for r in range(3):
    host, device = timed(step)
    print(f"eager, round {r}: host {host:.3f} ms a step, device {device:.3f} ms a step")

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    torch.cuda.set_sync_debug_mode("warn")
    step()
    torch.cuda.set_sync_debug_mode("default")
torch.cuda.synchronize()
print(f"synchronizing calls torch flagged in a step: {len(caught)}")
for w in caught[:5]:
    print("  ", str(w.message)[:200])

side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        step()
torch.cuda.current_stream().wait_stream(side)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    step()
for _ in range(3):
    graph.replay()
for r in range(3):
    eager_host, eager = timed(step)
    _, replay = timed(graph.replay)
    print(f"round {r}: eager {eager:.3f} ms a step, CUDA graph {replay:.3f} ms a step "
          f"(eager - graph {eager - replay:+.3f} ms)")

torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for _ in range(4):
        step()
    torch.cuda.synchronize()
host = collections.defaultdict(lambda: [0, 0.0])
for e in prof.events():
    if e.device_type == DeviceType.CPU:
        host[e.name][0] += 1
        host[e.name][1] += e.self_cpu_time_total
print(f"{'host us/step':>12} {'calls/step':>10}  host op or CUDA runtime call (self time)")
for name, (count, us) in sorted(host.items(), key=lambda kv: -kv[1][1])[:20]:
    print(f"{us / 4:12.1f} {count / 4:10.1f}  {name[:90]}")
