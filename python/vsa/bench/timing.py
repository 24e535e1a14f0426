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
    for i in range(warmup):
        calls[i % len(calls)]()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(iters)]
        for i, (start, end) in enumerate(events):
            start.record()
            calls[i % len(calls)]()
            end.record()
        torch.cuda.synchronize(device)
        return statistics.median(start.elapsed_time(end) for start, end in events)
    times = []
    for i in range(iters):
        start = time.perf_counter()
        calls[i % len(calls)]()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)
