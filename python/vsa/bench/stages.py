"""Where vsa's layer spends its forward time, by stage: each CUDA kernel of one call (on the CPU,
each op, by its own name or its enclosing op's) is given a stage by its name, so the attribution
needs nothing from the layer's code but the names of what it runs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

STAGES = ("coarse", "selection", "fine", "combine", "other")

# Kernel (GPU) or op (CPU) name -> stage, first match wins, case-insensitive. A name that matches
# none is 'coarse' before the first fine-stage entry of the call, 'combine' after the last one,
# 'other' in between. results.json lists every kernel with the stage it got: update this table
# from there when the layer's kernels change.
STAGE_OF_NAME: tuple[tuple[str, str], ...] = (
    # The inference path's fine op applies the gate combine in its epilogue: its time is fine's.
    (r"vsa::forward|vsa::fine_stage_gated|vsa::cuda::sm\d+::fwd", "fine"),
    (r"topk|sort", "selection"),  # vsa's selection runs inside its coarse_stage kernel
    (r"block_mean|coarse|softmax|gemm|gemv|matmul|bmm|aten::mm\b|nvjet|cutlass|xmma", "coarse"),
    (r"combine|gate", "combine"),
)


def stage_of(name: str) -> str | None:
    for pattern, stage in STAGE_OF_NAME:
        if re.search(pattern, name, flags=re.IGNORECASE):
            return stage
    return None


@dataclass
class StageTimes:
    ms: dict[str, float]  # per stage, averaged over the profiled calls
    kernels: list[dict]  # {"name", "stage", "ms"} of one call, in execution order
    total_ms: float  # summed time of what one call ran
    source: str  # what was timed: "CUDA kernels" or "CPU ops"


def attribute(entries: list[tuple[str, float]],
              match_names: list[str] | None = None) -> list[tuple[str, str, float]]:
    """(name, ms) of one call in execution order -> (name, stage, ms). match_names, if given,
    are the names that decide each entry's stage in place of its own."""
    stages = [stage_of(name) for name in (match_names or [name for name, _ in entries])]
    fine = [i for i, s in enumerate(stages) if s == "fine"]
    first, last = (fine[0], fine[-1]) if fine else (len(entries), len(entries))
    placed = [s or ("coarse" if i < first else "combine" if i > last else "other")
              for i, s in enumerate(stages)]
    return [(name, stage, ms) for (name, ms), stage in zip(entries, placed)]


_SCOPE = "vsa-bench-call"


def _descendants(event):
    for child in event.cpu_children:
        yield child
        yield from _descendants(child)


def _match_name(event, scope) -> str:
    """The name that decides a CPU op's stage: its outermost enclosing op (itself included)
    that has a stage, so the aten ops inside vsa::forward are fine-stage work; else its own."""
    chosen, e = event.name, event
    while e is not None and e is not scope:
        if stage_of(e.name):
            chosen = e.name
        e = e.cpu_parent
    return chosen


def _one_call(call: Callable[[], object], device: torch.device) -> list[tuple[str, str, float]]:
    """(name, stage, ms) of what one call ran: its CUDA kernels, or on the CPU every op under
    the call with its own (self) time."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda"
                                           else [])
    with profile(activities=activities) as prof:
        with record_function(_SCOPE):
            call()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    events = prof.events()
    if device.type == "cuda":
        # The call's own range shows up among the GPU events too (as a user annotation on
        # torch 2.11): it is the whole call, not a kernel of it.
        ran = sorted((e for e in events if e.device_type == DeviceType.CUDA and e.name != _SCOPE),
                     key=lambda e: e.time_range.start)
        return attribute([(e.name, e.time_range.elapsed_us() / 1e3) for e in ran])
    scope = next(e for e in events if e.name == _SCOPE)
    ran = sorted(_descendants(scope), key=lambda e: e.time_range.start)
    return attribute([(e.name, e.self_cpu_time_total / 1e3) for e in ran],
                     [_match_name(e, scope) for e in ran])


def profile_stages(call: Callable[[], object], device: torch.device, calls: int = 3) -> StageTimes:
    """Stage times of `call` (already warmed up), averaged over a few separately profiled calls
    so that each call's kernels are placed relative to its own fine stage."""
    totals = dict.fromkeys(STAGES, 0.0)
    kernels: list[dict] = []
    for _ in range(calls):
        placed = _one_call(call, device)
        for _, stage, ms in placed:
            totals[stage] += ms / calls
        kernels = [{"name": n, "stage": s, "ms": ms} for n, s, ms in placed]
    return StageTimes(totals, kernels, sum(totals.values()),
                      "CUDA kernels" if device.type == "cuda" else "CPU ops")
