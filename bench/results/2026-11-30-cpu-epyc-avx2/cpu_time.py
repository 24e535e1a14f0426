"""CPU time per call (all threads of the process), vsa against torch's dense SDPA on the same case:
on a machine shared with other busy processes, CPU time moves less with their load than wall time.

    python cpu_time.py [case] [iters]      (default cpu-wan-crop, 20)
"""
import sys
import time

import torch
import torch.nn.functional as F

import vsa
from vsa.bench.cases import CASES
from vsa.bench.inputs import case_inputs, select_blocks

case = CASES[sys.argv[1] if len(sys.argv) > 1 else "cpu-wan-crop"]
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 20
cpu = torch.device("cpu")
blocks, sets, generator = case_inputs(case, torch.float32, cpu, 0)
q2k_idx, q2k_num = select_blocks(case, case.topk, "random", cpu, generator)
vbs = blocks.variable_block_sizes
q, k, v = (t.requires_grad_() for t in sets[0])
# Dense attention over the real tokens only, as vsa bench's dense-sdpa row.
dq, dk, dv = (t.detach()[:, :, blocks.non_pad_index].requires_grad_() for t in (q, k, v))


def sparse_forward():
    return vsa.block_sparse_attn(q, k, v, q2k_idx, q2k_num, vbs)[0]


def dense_forward():
    return F.scaled_dot_product_attention(dq, dk, dv)


def timed(call):
    call()
    wall, cpu_time = [], []
    for _ in range(iters):
        w, c = time.perf_counter(), time.process_time()
        call()
        wall.append(time.perf_counter() - w)
        cpu_time.append(time.process_time() - c)
    return sorted(wall)[iters // 2] * 1e3, sorted(cpu_time)[iters // 2] * 1e3


rows = {}
for name, forward, leaves in (("vsa", sparse_forward, (q, k, v)), ("dense-sdpa", dense_forward, (dq, dk, dv))):
    with torch.no_grad():
        rows[name, "fwd"] = timed(forward)
    out = forward()
    grad = torch.randn_like(out)
    rows[name, "fwd+bwd"] = timed(lambda: torch.autograd.grad(forward(), leaves, grad))
print(f"{case.name}, torch threads {torch.get_num_threads()}, median of {iters}")
for what in ("fwd", "fwd+bwd"):
    (sw, sc), (dw, dc) = rows["vsa", what], rows["dense-sdpa", what]
    print(f"  {what:8s} vsa wall {sw:7.2f} ms cpu {sc:7.2f} ms | dense wall {dw:7.2f} ms cpu {dc:7.2f} ms"
          f" | dense/vsa wall {dw / sw:.2f}x cpu {dc / sc:.2f}x")
