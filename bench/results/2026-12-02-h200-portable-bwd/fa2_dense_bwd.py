"""Dense FA2 backward (torch SDPA, flash backend) on a Wan-like head layout, for Nsight Compute:
B1 H12 S8192 D128 bf16, a few backward calls so that ncu can skip the warm-up launches."""
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

q, k, v = (torch.randn(1, 12, 8192, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
           for _ in range(3))
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
dout = torch.randn_like(out)
for _ in range(4):
    torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
torch.cuda.synchronize()
