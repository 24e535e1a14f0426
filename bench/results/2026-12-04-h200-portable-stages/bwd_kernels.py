"""Where one backward's GPU time goes, kernel by kernel (torch.profiler, CUDA activity only,
10 calls after 3 warm-up ones): vsa's backward on the Wan 480p case (random top-63 lists, the
selection `vsa bench` makes; the kernels VSA_CUDA_KERNEL picks, so `VSA_CUDA_KERNEL=sm80` shows
the portable ones) and, with `fa2`, dense FA2's backward (torch SDPA, flash) on B1 H12 S39936
D128. Prints µs per call by kernel name, so the key pass's share of a backward can be set beside
FA2's main kernel's."""
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

import vsa
from vsa.bench.cases import CASES
from vsa.bench.inputs import case_inputs, select_blocks


def per_kernel(label, call, calls=10):
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    totals = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            totals[e.name] = totals.get(e.name, 0.0) + e.device_time
    print(f"== {label}")
    for name, t in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"{t / calls:9.1f} us  {name[:100]}")
    print(f"{sum(totals.values()) / calls:9.1f} us  all kernels per call")


dev = torch.device("cuda", 0)
if "fa2" in sys.argv[1:]:
    q, k, v = (torch.randn(1, 12, 39936, 128, device=dev, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    dout = torch.randn_like(out)
    per_kernel("dense FA2 backward, B1 H12 S39936 D128",
               lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
else:
    case = CASES["wan2.1-1.3b-480p"]
    blocks, sets, generator = case_inputs(case, torch.bfloat16, dev, 0)
    q, k, v = (t.detach().requires_grad_() for t in sets[0])
    q2k_idx, q2k_num = select_blocks(case, case.topk, "random", dev, generator)
    out, _ = vsa.block_sparse_attn(q, k, v, q2k_idx, q2k_num, blocks.variable_block_sizes)
    dout = torch.randn_like(out)
    per_kernel("vsa backward, Wan 480p top-63",
               lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
