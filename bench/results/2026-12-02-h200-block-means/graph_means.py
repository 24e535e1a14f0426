# One-off (device call 5, 2026-12-02): the block-means merge by CUDA graphs (ten calls per graph,
# replayed): three block_mean launches against the one block_means launch, the layer forward
# against the fine kernel.
import statistics, torch, vsa
from vsa.bench.cases import CASES
from vsa.bench.inputs import case_inputs, zero_pad_tokens
from vsa.bench.layer_peers import ours, ours_fine
from vsa.bench.layer_reference import reference_layer
from vsa.bench.problem import LayerProblem
from vsa.layer_ops import _block_mean, _block_means

case = CASES["wan2.1-1.3b-480p"]
blocks, sets, _ = case_inputs(case, torch.bfloat16, torch.device("cuda", 0), 0)
sets = [zero_pad_tokens(s, blocks.non_pad_index) for s in sets]
vbs = blocks.variable_block_sizes
q, k, v = sets[0][:3]
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
    three = [_block_mean(x, vbs, "bhsd") for x in (q, k, v)]
    one = _block_means(q, k, v, vbs, vbs, "bhsd")
    print("block_means bit-identical to three block_mean:", all(torch.equal(a, b) for a, b in zip(three, one)))
    ref = reference_layer(*sets[0], vbs, case.block_size, 63)
    prob = LayerProblem(sets[0], case.block_size, vbs, 63, ref.q2k_idx, ref.q2k_num)
    layer, fine = ours(prob), ours_fine(prob)
    graphs = {
        "three block_mean launches": graph_of(lambda: [_block_mean(x, vbs, "bhsd") for x in (q, k, v)]),
        "one block_means launch": graph_of(lambda: _block_means(q, k, v, vbs, vbs, "bhsd")),
        "layer forward": graph_of(lambda: layer(*sets[0])),
        "fine kernel": graph_of(lambda: fine(*sets[0])),
    }
    times = {name: [] for name in graphs}
    for _ in range(5):
        for name, g in graphs.items():
            times[name].append(per_call_us(g))
    for name, t in times.items():
        print(f"{name:26s} {statistics.median(t):9.1f} us per call  (rounds: {' '.join(f'{x:.1f}' for x in t)})")
    lt, ft = statistics.median(times["layer forward"]), statistics.median(times["fine kernel"])
    print(f"layer forward / fine kernel in graphs: {lt / ft:.3f}")
