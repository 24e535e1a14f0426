#!/usr/bin/env python3
"""Session 36: a model of what a K/V ring shared by G warpgroups of one SM costs in waits.

Each warpgroup owns one query tile and walks the union of the G tiles' sorted random lists in
block order: an entry its own list holds costs it 1 unit of work, any other entry `eps` (a wait
and an arrival). The ring has S slots, so a warpgroup may be at most S entries ahead of the
slowest one (a slot is refilled only once every warpgroup is done with its entry). The SM does 1
unit of work per unit of time in all, shared among the warpgroups ready to work, and one
warpgroup alone gets at most 1/R of it (R warpgroups keep the SM busy). Loads are taken as
instant: the probe's floors bound them apart. Printed: the makespan over the ideal G * topk (the
SM never idle), averaged over random lists. See docs/kernel-notes.md, "The floor with a K/V
tile read once for a CTA's query tiles". Run: python3 shared_ring_model.py (about a minute).
"""
import random
import statistics


def makespan_ratio(nk, topk, group, slots, saturating, eps=0.02, trials=10, seed=1, dt=0.01):
    rnd = random.Random(seed)
    ratios = []
    for _ in range(trials):
        lists = [set(rnd.sample(range(nk), topk)) for _ in range(group)]
        union = sorted(set().union(*lists))
        cost = [[1.0 if block in own else eps for block in union] for own in lists]
        pos = [0] * group  # the entry each warpgroup is on
        left = [cost[g][0] for g in range(group)]  # its work left there
        t = 0.0
        while min(pos) < len(union):
            lowest = min(pos)  # the ring holds entries lowest .. lowest + slots - 1
            ready = [g for g in range(group) if pos[g] < len(union) and pos[g] < lowest + slots]
            rate = min(1.0 / saturating, 1.0 / len(ready)) if ready else 0.0
            for g in ready:
                left[g] -= rate * dt
                while left[g] <= 0 and pos[g] < len(union):
                    pos[g] += 1
                    if pos[g] < len(union):
                        left[g] += cost[g][pos[g]]
            t += dt
        ratios.append(t / (group * topk))
    return statistics.mean(ratios)


if __name__ == "__main__":
    for name, nk, topk in [("H16 top-k 64", 768, 64), ("H16 top-k 192", 768, 192), ("Wan 480p", 624, 63)]:
        for group in (2, 4):
            row = " ".join(f"S{s}: {makespan_ratio(nk, topk, group, s, 2):.3f}" for s in (3, 5, 8))
            print(f"{name}, {group} warpgroups, R = 2: {row}")
