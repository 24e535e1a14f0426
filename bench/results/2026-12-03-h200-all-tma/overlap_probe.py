"""Would the stored-dS backward gain from running one group's dQ pass beside the next group's
key pass? Two independent Wan 480p-like backwards of 6 heads each (A and B: 624 blocks, top-k
63, the latent's partial blocks, random lists) are timed alone, one after the other on one
stream, and on two streams with B started `offset` ms after A (a sleep kernel first on B's
stream), so that A's dQ pass meets B's lists and key pass; B's stream at normal and at high
priority. No gain from sharing the SMs shows as a two-stream time of about A + B.

    python3 overlap_probe.py
"""
import statistics

import torch

import vsa

dev = torch.device("cuda")


def problem(seed, heads=6):
    gen = torch.Generator(dev).manual_seed(seed)
    vbs = vsa.build_vsa_metadata((21, 30, 52), tile_size=(4, 4, 4), device=dev).variable_block_sizes
    nb = vbs.numel()
    shape = (1, heads, nb * 64, 128)
    q, k, v = (torch.randn(shape, generator=gen, device=dev).to(torch.bfloat16) for _ in range(3))
    scores = torch.rand((1, heads, nb, nb), generator=gen, device=dev)
    idx = scores.topk(63, dim=-1).indices.sort(dim=-1).values.to(torch.int32)
    num = torch.full((1, heads, nb), 63, dtype=torch.int32, device=dev)
    out, lse = vsa.block_sparse_attn(q, k, v, idx, num, vbs)
    dout = torch.randn_like(out)
    return lambda: torch.ops.vsa.backward(dout, q, k, v, out, lse, idx, num, vbs, None, 128 ** -0.5, "bhsd",
                                          False)


def median_ms(fn, runs=15):
    for _ in range(3):
        fn()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


bwd_a, bwd_b = problem(1), problem(2)
main = torch.cuda.current_stream()
cycles_per_ms = 1e6 / median_ms(lambda: torch.cuda._sleep(1_000_000))


def two_streams(offset_ms, side):
    def run():
        side.wait_stream(main)
        bwd_a()
        with torch.cuda.stream(side):
            if offset_ms > 0:
                torch.cuda._sleep(int(offset_ms * cycles_per_ms))
            bwd_b()
        main.wait_stream(side)
    return run


a, b = median_ms(bwd_a), median_ms(bwd_b)
seq = median_ms(lambda: (bwd_a(), bwd_b()))
print(f"A alone {a:.3f} ms, B alone {b:.3f} ms, A then B on one stream {seq:.3f} ms "
      f"(sleep: {cycles_per_ms / 1e6:.3f} G cycles per s)")
for name, side in (("normal", torch.cuda.Stream()), ("high", torch.cuda.Stream(priority=-1))):
    for offset in (0.0, 1.0, 1.6, 1.9, 2.2, 2.6):
        t = median_ms(two_streams(offset, side))
        print(f"B's stream {name:6} priority, B {offset:.1f} ms after A: {t:.3f} ms "
              f"(A + B = {a + b:.3f}; the later end, were nothing shared: {max(a, offset + b):.3f})")
