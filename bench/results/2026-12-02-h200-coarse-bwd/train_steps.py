"""Five training steps of video_sparse_attn on Wan 480p (the graph_times.py inputs), nothing else:
the process a kernel profiler (ncu) runs to see the layer's backward kernels."""
import torch

import vsa
from vsa.bench.cases import CASES
from vsa.bench.inputs import case_inputs, zero_pad_tokens

case = CASES["wan2.1-1.3b-480p"]
blocks, sets, _ = case_inputs(case, torch.bfloat16, torch.device("cuda", 0), 0)
q, k, v = zero_pad_tokens(sets[0], blocks.non_pad_index)[:3]
vbs = blocks.variable_block_sizes
leaves = [x.detach().requires_grad_() for x in (q, k, v)]
dout = torch.randn_like(q)
for _ in range(5):
    out = vsa.video_sparse_attn(*leaves, vbs, vbs, case.topk, block_size=case.block_size)
    torch.autograd.backward(out, dout)
torch.cuda.synchronize()
