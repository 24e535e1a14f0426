"""A lane-by-lane model of the CUDA coarse stage's selection (src/cuda/layer/coarse_stage.cu,
select_rows with search_start): the bisection for the take-th largest order key, with and
without the start from the lanes' bounds, then the list pass with ties to the lower id. Checks
both against a sort on random rows (wide, heavily tied, clustered and all-equal keys, dead
blocks as key 0, take 1-79) and prints the count passes per row of each.

    python bench/layer/search_start_model.py [--rows 3000]
"""
import argparse

import numpy as np

WORD = 0xFFFFFFFF


def lane_keys(keys):
    """The keys each of the 32 lanes reads: j = 128·i + 4·lane + e."""
    lanes = [[] for _ in range(32)]
    for j0 in range(0, len(keys), 128):
        for lane in range(32):
            lanes[lane] += [int(k) for k in keys[j0 + 4 * lane:j0 + 4 * lane + 4]]
    return lanes


def count_at_least(keys, cand):
    return int((keys >= np.uint64(cand)).sum())


def select(keys, take, n_live, use_start):
    """(the selected ids ascending, count passes) as the kernel computes them."""
    threshold = 0 if take > 0 else WORD
    at_threshold, ties_wanted, passes = n_live, take, 0
    if take < n_live:
        first_bit = top_bit = 31
        if use_start and 0 < take <= 64:
            lanes = lane_keys(keys)
            passes += 1
            low = min(sorted(lane)[-2] for lane in lanes)
            high = max(max(lane) for lane in lanes)
            if low == high:
                threshold, first_bit = low, -1
            else:
                first_bit = (low ^ high).bit_length() - 1
                threshold = high & ~((2 << first_bit) - 1) & WORD
            at_threshold, top_bit = -1, first_bit
        for bit in range(top_bit, -1, -1):
            if at_threshold == take:
                break
            if bit <= first_bit:
                count = count_at_least(keys, threshold | (1 << bit))
                passes += 1
                if count >= take:
                    threshold |= 1 << bit
                    at_threshold = count
        if at_threshold != take:
            above = 0 if threshold == WORD else count_at_least(keys, threshold + 1)
            passes += 1
            ties_wanted = take - above
    picked, ties = [], 0
    for j, key in enumerate(int(k) for k in keys):
        if key > threshold:
            picked.append(j)
        elif key == threshold and threshold != 0:
            if ties < ties_wanted:
                picked.append(j)
            ties += 1
    return picked, passes


def by_sort(keys, take):
    order = sorted(range(len(keys)), key=lambda j: (-int(keys[j]), j))
    return sorted(j for j in order[:take] if keys[j] != 0)


def random_row(rng, trial):
    nk = int(rng.integers(1, 700))
    kind = trial % 4
    if kind == 0:
        k = rng.integers(1, 2**32, nk, dtype=np.uint64)
    elif kind == 1:
        k = rng.integers(1, 5, nk, dtype=np.uint64)
    elif kind == 2:
        k = (0x80000000 + rng.normal(0, 1e4, nk).astype(np.int64)).astype(np.uint64)
    else:
        k = np.full(nk, WORD if trial % 8 == 3 else 7, dtype=np.uint64)
    if trial % 3 == 0:
        k[rng.random(nk) < 0.3] = 0
    keys = np.zeros((nk + 127) // 128 * 128, dtype=np.uint64)
    keys[:nk] = k
    return keys


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=3000)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    passes = [0, 0]
    for trial in range(args.rows):
        keys = random_row(rng, trial)
        n_live = int((keys > 0).sum())
        take = min(int(rng.integers(1, 80)), n_live)
        with_start, p_with = select(keys, take, n_live, True)
        without, p_without = select(keys, take, n_live, False)
        assert with_start == without == by_sort(keys, take), (trial, take, n_live)
        passes[0] += p_with
        passes[1] += p_without
    print(f"{args.rows} rows: the same lists as a sort; count passes per row {passes[0] / args.rows:.1f} "
          f"with the start, {passes[1] / args.rows:.1f} without")


if __name__ == "__main__":
    main()
