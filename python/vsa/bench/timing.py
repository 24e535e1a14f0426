"""Device-side timing: median of many runs, rotating over several input sets."""

from __future__ import annotations

import math
import statistics
import time
from typing import Any, Callable

import torch

# Rotate through enough input sets that their combined size is a few times the L2 cache, so a
# small case does not find its operands already cached from the previous run.
_L2_MULTIPLE = 3
_MAX_SETS = 8


def rotation_count(bytes_per_set: int, device: torch.device) -> int:
    if device.type != "cuda":
        return 1
    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    return max(1, min(_MAX_SETS, math.ceil(_L2_MULTIPLE * l2 / max(bytes_per_set, 1))))


def median_ms(calls: list[Callable[[], Any]], *, warmup: int, iters: int,
              device: torch.device) -> float:
    """Median time of one call in ms; call i of the run is calls[i % len(calls)].

    On CUDA each run is bracketed by events on the current stream, so only device time counts
    and the host never waits between runs; on the CPU it is wall time."""
    return alternating_medians_ms([calls], warmup=warmup, iters=iters, device=device)[0]


def alternating_medians_ms(call_lists: list[list[Callable[[], Any]]], *, warmup: int, iters: int,
                           device: torch.device) -> list[float]:
    """median_ms of each list, their runs interleaved (run i of every list, then run i + 1), so
    that a change in the device's speed during the measurement falls on all of them alike: the
    ratio of two medians is then fairer than from two measurements one after the other."""
    for i in range(warmup):
        for calls in call_lists:
            calls[i % len(calls)]()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        events = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                   for _ in range(iters)] for _ in call_lists]
        for i in range(iters):
            for calls, runs in zip(call_lists, events):
                start, end = runs[i]
                start.record()
                calls[i % len(calls)]()
                end.record()
        torch.cuda.synchronize(device)
        return [statistics.median(start.elapsed_time(end) for start, end in runs) for runs in events]
    times: list[list[float]] = [[] for _ in call_lists]
    for i in range(iters):
        for calls, runs in zip(call_lists, times):
            start = time.perf_counter()
            calls[i % len(calls)]()
            runs.append((time.perf_counter() - start) * 1e3)
    return [statistics.median(runs) for runs in times]
