"""Dense FA2's backward (torch SDPA, flash backend) timed on the Wan 480p shape (B1 H12 S39936
D128 bf16), the way `vsa bench` times a backward (a retained graph, the backward alone), to put
the portable backward's efficiency beside it in the same run. Prints ms and TFLOP/s (2.5x the
forward's 4·B·H·S²·D)."""
import statistics

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

B, H, S, D = 1, 12, 39936, 128
q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
dout = torch.randn_like(out)
times = []
for i in range(12):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    end.record()
    torch.cuda.synchronize()
    if i >= 2:
        times.append(start.elapsed_time(end))
ms = statistics.median(times)
print(f"dense FA2 backward B{B} H{H} S{S} D{D}: {ms:.3f} ms, {2.5 * 4 * B * H * S * S * D / ms / 1e9:.1f} TFLOP/s")
