"""vsa bench's timing: medians of runs, and of several call lists timed alternately."""

import functools
import time

import torch

from vsa.bench.timing import alternating_medians_ms, median_ms

CPU = torch.device("cpu")


def _sleeper(log, name, ms):
    log.append(name)
    time.sleep(ms / 1e3)


def test_alternating_runs_interleave_the_lists_in_warmup_and_timing():
    log = []
    a = [functools.partial(_sleeper, log, f"a{i}", 0) for i in range(2)]
    b = [functools.partial(_sleeper, log, f"b{i}", 0) for i in range(2)]
    alternating_medians_ms([a, b], warmup=1, iters=3, device=CPU)
    assert log == ["a0", "b0", "a0", "b0", "a1", "b1", "a0", "b0"]


def test_each_list_gets_the_median_of_its_own_runs():
    log = []
    fast = [functools.partial(_sleeper, log, "fast", 2)]
    slow = [functools.partial(_sleeper, log, "slow", 12)]
    fast_ms, slow_ms = alternating_medians_ms([fast, slow], warmup=0, iters=5, device=CPU)
    # sleep() never returns early; a loaded machine only adds time, never 10 ms less.
    assert 2 <= fast_ms < slow_ms and slow_ms >= 12 and slow_ms - fast_ms > 5
    assert median_ms(slow, warmup=0, iters=3, device=CPU) >= 12
