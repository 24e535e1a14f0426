# One-off diagnostic (device call 2, 2026-12-02): why `vsa bench --op layer`'s alternating
# ratio (1.122) differs from the ratio of two separate medians (1.05-1.06).
import statistics, torch
from vsa.bench.cases import CASES
from vsa.bench.inputs import case_inputs, zero_pad_tokens
from vsa.bench.layer_peers import ours, ours_fine
from vsa.bench.layer_reference import reference_layer
from vsa.bench.problem import LayerProblem

dev = torch.device("cuda", 0)
case = CASES["wan2.1-1.3b-480p"]
blocks, sets, _ = case_inputs(case, torch.bfloat16, dev, 0)
sets = [zero_pad_tokens(s, blocks.non_pad_index) for s in sets]
vbs = blocks.variable_block_sizes
ref = reference_layer(*sets[0], vbs, case.block_size, 63)
prob = LayerProblem(sets[0], case.block_size, vbs, 63, ref.q2k_idx, ref.q2k_num)
layer, fine = ours(prob), ours_fine(prob)
calls = {"layer": lambda: layer(*sets[0]), "fine": lambda: fine(*sets[0])}

def run(order, iters=30, sync=False):
    for _ in range(5):
        for n in order: calls[n]()
    torch.cuda.synchronize()
    ev = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)] for _ in order]
    for i in range(iters):
        for j, n in enumerate(order):
            ev[j][i][0].record(); calls[n](); ev[j][i][1].record()
            if sync: torch.cuda.synchronize()
    torch.cuda.synchronize()
    return [[s.elapsed_time(e) for s, e in runs] for runs in ev]

with torch.no_grad():
    for order, sync in [(["layer"], False), (["fine"], False), (["layer", "fine"], False), (["fine", "layer"], False),
                        (["fine", "fine"], False), (["layer", "layer"], False), (["layer", "fine"], True),
                        (["layer"], True), (["fine"], True)]:
        t = run(order, sync=sync)
        med = [statistics.median(x) for x in t]
        print(f"order {'+'.join(order):12s} sync={sync!s:5s} medians " + " ".join(f"{n}={m:.3f}" for n, m in zip(order, med))
              + (f" ratio {med[0] / med[1]:.3f}" if len(order) == 2 else ""))
        print("   first run times:", " | ".join(" ".join(f"{v:.2f}" for v in x[:8]) for x in t))
