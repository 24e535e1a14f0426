# One-off A/B (device call 3, 2026-12-02): block means with L2 prefetch ahead (VSA_MEAN_PREFETCH=0/8/16),
# three launches (q, k, v) against one launch of three times the heads (the cost of one merged launch),
# and the layer forward over the fine kernel alternately under each setting.
import os, statistics, torch, vsa
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
q, k, v = sets[0][:3]
qkv = torch.cat([q, k, v], dim=1).contiguous()

def timed(fn, iters=50, reps=5):
    for _ in range(5): fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters): fn()
        b.record(); torch.cuda.synchronize()
        out.append(a.elapsed_time(b) * 1000 / iters)
    return statistics.median(out)

with torch.no_grad():
    os.environ["VSA_MEAN_PREFETCH"] = "0"
    base = vsa.layer.block_means(q, k, v, vbs, vbs)
    for ahead in ("8", "16"):
        os.environ["VSA_MEAN_PREFETCH"] = ahead
        other = vsa.layer.block_means(q, k, v, vbs, vbs)
        print(f"prefetch {ahead}: bit-identical to none: {all(torch.equal(x, y) for x, y in zip(base, other))}")
    for rnd in range(3):
        for ahead in ("0", "8", "16"):
            os.environ["VSA_MEAN_PREFETCH"] = ahead
            t3 = timed(lambda: vsa.layer.block_means(q, k, v, vbs, vbs))
            t1 = timed(lambda: vsa.layer.block_means(qkv, qkv[:, :1], qkv[:, :1], vbs, vbs))
            print(f"round {rnd} prefetch {ahead:>2}: q,k,v in three launches {t3:7.1f} us; "
                  f"one launch of 36 heads (+2 of 1 head) {t1:7.1f} us")
    ref = reference_layer(*sets[0], vbs, case.block_size, 63)
    prob = LayerProblem(sets[0], case.block_size, vbs, 63, ref.q2k_idx, ref.q2k_num)
    layer, fine = ours(prob), ours_fine(prob)
    for rnd in range(2):
        for ahead in ("0", "8", "16"):
            os.environ["VSA_MEAN_PREFETCH"] = ahead
            lt, ft = [], []
            for _ in range(5): layer(*sets[0]); fine(*sets[0])
            torch.cuda.synchronize()
            for _ in range(30):
                for fn, acc in ((layer, lt), (fine, ft)):
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record(); fn(*sets[0]); b.record(); acc.append((a, b))
            torch.cuda.synchronize()
            lm = statistics.median(a.elapsed_time(b) for a, b in lt)
            fm = statistics.median(a.elapsed_time(b) for a, b in ft)
            print(f"round {rnd} prefetch {ahead:>2}: layer fwd {lm:.3f} ms, fine {fm:.3f} ms, alternately {lm / fm:.3f}")
