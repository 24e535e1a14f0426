"""One backward timed the same way for vsa and for dense FA2, so their efficiencies compare in
the same device state: `warm` seconds of calls back to back first (0: none), then the median of
12 CUDA-event timings of one call each (the way fa2_dense_bwd_time.py times FA2). Under
sustained load the H200 holds its ~700 W cap by lowering the SM clock (smi.log of call 1:
1.78-1.95 GHz during vsa's timings, 1.98 GHz through the ~1 s that FA2's timing takes), so a
timing that starts cold runs faster than one that starts after seconds of load.

  python3 sustained_bwd.py vsa|fa2 [warm seconds]

vsa: its backward on the Wan 480p case (random top-63 lists; VSA_CUDA_KERNEL picks the kernels);
fa2: dense FA2's backward (torch SDPA, flash) on B1 H12 S39936 D128. Effective TFLOP/s count
2.5x the forward's FLOPs, as `vsa bench` does."""
import statistics
import sys
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import vsa
from vsa.bench.cases import CASES
from vsa.bench.inputs import case_inputs, select_blocks

which = sys.argv[1]
warm = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
dev = torch.device("cuda", 0)
if which == "fa2":
    B, H, S, D = 1, 12, 39936, 128
    q, k, v = (torch.randn(B, H, S, D, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    flops = 2.5 * 4 * B * H * S * S * D
    label = f"dense FA2 backward B{B} H{H} S{S} D{D}"
else:
    case = CASES["wan2.1-1.3b-480p"]
    blocks, sets, generator = case_inputs(case, torch.bfloat16, dev, 0)
    q, k, v = (t.detach().requires_grad_() for t in sets[0])
    q2k_idx, q2k_num = select_blocks(case, case.topk, "random", dev, generator)
    out, _ = vsa.block_sparse_attn(q, k, v, q2k_idx, q2k_num, blocks.variable_block_sizes)
    flops = 2.5 * case.sparse_flops()
    label = "vsa backward, Wan 480p top-63"
dout = torch.randn_like(out)


def call():
    torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)


call()
torch.cuda.synchronize()
until = time.monotonic() + warm
while time.monotonic() < until:
    for _ in range(4):
        call()
    torch.cuda.synchronize()
times = []
for _ in range(12):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    call()
    end.record()
    torch.cuda.synchronize()
    times.append(start.elapsed_time(end))
ms = statistics.median(times)
print(f"{label}, after {warm:g} s of load: {ms:.3f} ms, {flops / ms / 1e9:.1f} TFLOP/s "
      f"(at {time.strftime('%H:%M:%S', time.gmtime())})")
