# One-off (device call 4, 2026-12-02): GPU-side times without the host, by CUDA graphs that
# hold 10 repetitions each: the layer's three block-mean launches against one launch of three
# times the heads (what merging q, k and v into one launch would give), the coarse stage, and
# the layer forward against the fine kernel.
import statistics, torch, vsa
from vsa.bench.cases import CASES
from vsa.bench.inputs import case_inputs, zero_pad_tokens
from vsa.bench.layer_peers import ours, ours_fine
from vsa.bench.layer_reference import reference_layer
from vsa.bench.problem import LayerProblem
from vsa.layer_ops import _block_mean, _coarse_stage

dev = torch.device("cuda", 0)
case = CASES["wan2.1-1.3b-480p"]
blocks, sets, _ = case_inputs(case, torch.bfloat16, dev, 0)
sets = [zero_pad_tokens(s, blocks.non_pad_index) for s in sets]
vbs = blocks.variable_block_sizes
q, k, v = sets[0][:3]
qkv = torch.cat([q, k, v], dim=1).contiguous()
REPS = 10

def graph_of(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3): fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(REPS): fn()
    return g

def per_call_us(g, replays=20):
    g.replay(); torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(replays): g.replay()
    b.record(); torch.cuda.synchronize()
    return a.elapsed_time(b) * 1000 / (replays * REPS)

with torch.no_grad():
    means = vsa.layer.block_means(q, k, v, vbs, vbs)
    graphs = {
        "three launches (q, k, v)": graph_of(lambda: (_block_mean(q, vbs, "bhsd"), _block_mean(k, vbs, "bhsd"),
                                                      _block_mean(v, vbs, "bhsd"))),
        "one launch of 36 heads": graph_of(lambda: _block_mean(qkv, vbs, "bhsd")),
        "one launch of 12 heads": graph_of(lambda: _block_mean(q, vbs, "bhsd")),
        "coarse stage": graph_of(lambda: _coarse_stage(*means, vbs, 63, 128 ** -0.5)),
    }
    ref = reference_layer(*sets[0], vbs, case.block_size, 63)
    prob = LayerProblem(sets[0], case.block_size, vbs, 63, ref.q2k_idx, ref.q2k_num)
    layer, fine = ours(prob), ours_fine(prob)
    try:
        graphs["layer forward"] = graph_of(lambda: layer(*sets[0]))
        graphs["fine kernel"] = graph_of(lambda: fine(*sets[0]))
    except Exception as e:  # a host sync in capture: report, time the rest
        print("layer graphs not captured:", repr(e)[:300])
        graphs.pop("layer forward", None)
    times = {name: [] for name in graphs}
    for _ in range(5):
        for name, g in graphs.items():
            times[name].append(per_call_us(g))
    for name, t in times.items():
        print(f"{name:26s} {statistics.median(t):9.1f} us per call  (rounds: {' '.join(f'{x:.1f}' for x in t)})")
    if "fine kernel" in times:
        lt, ft = statistics.median(times["layer forward"]), statistics.median(times["fine kernel"])
        print(f"layer forward / fine kernel in graphs: {lt / ft:.3f}")
