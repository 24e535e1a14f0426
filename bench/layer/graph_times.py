"""GPU-side times of the layer's parts and of the backward, without the host: each part is
captured ten times in one CUDA graph, the graph replayed 20 times per round, the parts taken in
turn for several rounds, and the median round reported (µs per call).

A Python loop over the custom ops measures the host (~50 µs of dispatch per op), not the
kernels; in a graph only the GPU's time and the launches' own gaps remain.

    python bench/layer/graph_times.py [--case wan2.1-1.3b-480p] [--parts means,coarse,...]
        [--coarse-rows 32,16] [--rounds 5]

Parts: means (block_means of q, k, v), coarse (the coarse stage on those means), coarse-bwd
(the coarse stage's backward: the op where the package has it, else the torch version it
replaced), fine-gated (the layer's fine stage with the coarse output added), fine
(block_sparse_attn alone on the same lists, the real query rows: the yardstick of issue 9),
layer (video_sparse_attn without gradients), layer-train (its forward and backward, the
gradients of q, k and v accumulated), bwd and bwd-rows (the backward op on the layer's lists,
without and with the real query rows). --coarse-rows times the coarse stage once per
VSA_COARSE_ROWS value.
"""
import argparse
import os
import statistics

import torch

import vsa
import vsa.layer_ops
from vsa.attention import _backward, _forward
from vsa.bench.cases import CASES
from vsa.bench.inputs import case_inputs, zero_pad_tokens
from vsa.layer_ops import _block_means, _coarse_stage, _fine_stage_gated

REPS = 10


def graph_of(fn):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(REPS):
            fn()
    return graph


def per_call_us(graph, replays=20):
    graph.replay()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) * 1000 / (replays * REPS)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", default="wan2.1-1.3b-480p", choices=sorted(CASES))
    parser.add_argument("--parts", default="means,coarse,fine-gated,fine,layer")
    parser.add_argument("--coarse-rows", default="", help="VSA_COARSE_ROWS values to time the coarse stage at")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    case = CASES[args.case]
    blocks, sets, _ = case_inputs(case, torch.bfloat16, torch.device("cuda", 0), 0)
    q, k, v = zero_pad_tokens(sets[0], blocks.non_pad_index)[:3]
    vbs, topk, scale = blocks.variable_block_sizes, case.topk, q.shape[-1] ** -0.5
    with torch.no_grad():
        means = _block_means(q, k, v, vbs, vbs, "bhsd")
        coarse, q2k_idx, q2k_num = _coarse_stage(*means, vbs, topk, scale)
        out, lse = _forward(q, k, v, q2k_idx, q2k_num, vbs, None, scale, True, "bhsd", False)
        dout = torch.randn_like(out)
        dcoarse = torch.randn_like(coarse)
    # Packages before the coarse backward's op ran it as torch ops (layer_ops.coarse_stage_backward).
    coarse_backward = getattr(vsa.layer_ops, "_coarse_stage_backward", None) or vsa.layer_ops.coarse_stage_backward
    leaves = [x.detach().requires_grad_() for x in (q, k, v)]

    def layer_train():
        with torch.enable_grad():
            trained = vsa.video_sparse_attn(*leaves, vbs, vbs, topk, block_size=case.block_size)
            torch.autograd.backward(trained, dout)

    parts = {
        "means": lambda: _block_means(q, k, v, vbs, vbs, "bhsd"),
        "coarse": lambda: _coarse_stage(*means, vbs, topk, scale),
        "coarse-bwd": lambda: coarse_backward(*means, vbs, coarse, dcoarse, scale),
        "fine-gated": lambda: _fine_stage_gated(q, k, v, q2k_idx, q2k_num, vbs, vbs, coarse, None, scale, "bhsd"),
        "fine": lambda: vsa.block_sparse_attn(q, k, v, q2k_idx, q2k_num, vbs, need_lse=False,
                                              q_variable_block_sizes=vbs)[0],
        "layer": lambda: vsa.video_sparse_attn(q, k, v, vbs, vbs, topk, block_size=case.block_size),
        "layer-train": layer_train,
        "bwd": lambda: _backward(dout, q, k, v, out, lse, q2k_idx, q2k_num, vbs, None, scale, "bhsd", False),
        "bwd-rows": lambda: _backward(dout, q, k, v, out, lse, q2k_idx, q2k_num, vbs, vbs, scale, "bhsd", False),
    }
    wanted = [name for name in args.parts.split(",") if name]
    unknown = [name for name in wanted if name not in parts]
    if unknown:
        parser.error(f"unknown parts {unknown}; known: {', '.join(parts)}")
    with torch.no_grad():
        graphs = {name: graph_of(parts[name]) for name in wanted}
        for rows in [r for r in args.coarse_rows.split(",") if r]:
            os.environ["VSA_COARSE_ROWS"] = rows  # read at launch, so at capture
            graphs[f"coarse rows={rows}"] = graph_of(parts["coarse"])
            del os.environ["VSA_COARSE_ROWS"]
        times = {name: [] for name in graphs}
        for _ in range(args.rounds):
            for name, graph in graphs.items():
                times[name].append(per_call_us(graph))
    for name, t in times.items():
        print(f"{name:18s} {statistics.median(t):9.1f} us  (rounds: {' '.join(f'{x:.1f}' for x in t)})")
    if "layer" in times and "fine" in times:
        ratio = statistics.median(times["layer"]) / statistics.median(times["fine"])
        print(f"layer / fine: {ratio:.3f}")


if __name__ == "__main__":
    main()
