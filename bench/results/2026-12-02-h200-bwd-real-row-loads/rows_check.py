# One-off check (device call 3, 2026-12-02): is the forward slower when told the real query rows
# (q_variable_block_sizes)? 'vsa' and 'vsa-rows' of `vsa bench` timed alternately, in one process.
import statistics, torch, vsa
from vsa.bench.cases import CASES
from vsa.bench.inputs import case_inputs, select_blocks

dev = torch.device("cuda", 0)
case = CASES["wan2.1-1.3b-480p"]
blocks, sets, gen = case_inputs(case, torch.bfloat16, dev, 0)
vbs = blocks.variable_block_sizes
idx, num = select_blocks(case, 63, "random", dev, gen)
q, k, v = sets[0]
calls = {"all rows": lambda: vsa.block_sparse_attn(q, k, v, idx, num, vbs, need_lse=False),
         "real rows": lambda: vsa.block_sparse_attn(q, k, v, idx, num, vbs, need_lse=False, q_variable_block_sizes=vbs)}
with torch.no_grad():
    for order in (["all rows", "real rows"], ["real rows", "all rows"]):
        for _ in range(5):
            for n in order: calls[n]()
        torch.cuda.synchronize()
        ev = {n: [] for n in order}
        for i in range(40):
            for n in order:
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(); calls[n](); e.record(); ev[n].append((s, e))
        torch.cuda.synchronize()
        print("alternately, " + ", ".join(f"{n} {statistics.median(s.elapsed_time(e) for s, e in ev[n]):.3f} ms" for n in order))
