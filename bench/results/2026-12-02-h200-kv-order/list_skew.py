# The skew of the layer's own lists on Wan 480p (CPU backend, bench inputs; the CPU and CUDA lists are
# bit-identical by contract): per-KV-block list lengths of three heads, partial against full blocks.
#   PYTHONPATH=<vsa package> python bench/results/2026-12-02-h200-kv-order/list_skew.py
import torch, vsa
from vsa.bench.cases import CASES
from vsa.bench.inputs import case_inputs, zero_pad_tokens
from vsa.layer_ops import _block_means, _coarse_stage
case = CASES["wan2.1-1.3b-480p"]
torch.manual_seed(0)
blocks, sets, _ = case_inputs(case, torch.bfloat16, torch.device("cpu"), 0)
q, k, v = zero_pad_tokens(sets[0], blocks.non_pad_index)[:3]
vbs = blocks.variable_block_sizes
means = _block_means(q, k, v, vbs, vbs, "bhsd")
coarse, idx, num = _coarse_stage(*means, vbs, case.topk, q.shape[-1] ** -0.5)
nk = vbs.numel()
for h in range(0, 12, 4):
    counts = torch.bincount(idx[0, h][idx[0, h] >= 0].flatten().long(), minlength=nk)
    s = counts.sort(descending=True).values
    print(h, "max", s[:8].tolist(), "mean", counts.float().mean().item(), "zero", (counts == 0).sum().item())
full = vbs == 64
print("partial blocks:", (~full).sum().item(), "of", nk)
counts = torch.bincount(idx[0, 0][idx[0, 0] >= 0].flatten().long(), minlength=nk)
print("mean count partial", counts[~full].float().mean().item(), "full", counts[full].float().mean().item())
