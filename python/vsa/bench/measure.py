"""The calls the benchmark times: forward under no_grad, backward alone, or forward + backward, each
in the peer's scope; and how a peer that fails is logged."""

from __future__ import annotations

import functools
import sys
from typing import Callable

import torch

from .problem import Runner, Unavailable
from .timing import median_ms

Inputs = tuple[torch.Tensor, ...]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def reason(e: BaseException) -> str:
    if isinstance(e, Unavailable):
        return str(e)
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first[:160]}"


def progress(r) -> None:
    """One line per measured row on stderr: its timings, error and note, or why it is n/a."""
    if r.fwd_ms is None:
        log(f"  {r.backend}: n/a ({r.note})")
        return
    line = f"  {r.backend}: " + ", ".join(r.timings())
    if r.rel_error is not None:
        line += f", rel err {r.rel_error:.2e}"
    if getattr(r, "bwd_rel_error", None) is not None:
        line += f", dq rel err {r.bwd_rel_error:.2e}"
    if r.note:
        line += f"  [{r.note}]"
    log(line)


def add_note(result, note: str) -> None:
    result.note = "; ".join(filter(None, (result.note, note)))


def timed_forward(result, make: Callable, problem, input_sets: list[Inputs],
                  check: Callable | None, timing: dict) -> Runner | None:
    """Builds the peer, checks its first output (that call also compiles where a peer compiles)
    and times its forward under no_grad into result.fwd_ms. None, with the reason in
    result.note, when the peer cannot run: a peer that fails is reported, never fatal."""
    try:
        runner = make(problem)
        with torch.no_grad():
            out = runner(*input_sets[0])
            result.rel_error = check(out) if check else None
            del out
            result.fwd_ms = median_ms(forward_calls(runner, input_sets), **timing)
        return runner
    except Exception as e:
        add_note(result, reason(e))
        return None


def forward_calls(runner: Runner, input_sets: list[Inputs]) -> list[Callable]:
    """Call them under torch.no_grad(): the inference path."""
    return [functools.partial(runner, *inputs) for inputs in input_sets]


def _in_scope(runner: Runner, call: Callable):
    with runner.scope():
        return call()


def backward_calls(runner: Runner, input_sets: list[Inputs]) -> list[Callable]:
    """One retained graph per input set, so that timing replays only the backward."""
    calls = []
    for inputs in input_sets:
        leaves = [t.detach().requires_grad_() for t in inputs]
        out = runner(*leaves)
        grad = functools.partial(torch.autograd.grad, out, leaves, torch.randn_like(out),
                                 retain_graph=True)
        calls.append(functools.partial(_in_scope, runner, grad))
    return calls


def checked_dq(runner: Runner, inputs: Inputs, dout: torch.Tensor, check: Callable) -> float:
    """check's error of dq, the gradient of the first input (q), for the output gradient dout:
    the backward's result checked once, beside the timing that replays it."""
    leaves = [t.detach().requires_grad_() for t in inputs]
    out = runner(*leaves)
    with runner.scope():
        (dq,) = torch.autograd.grad(out, leaves[0], dout)
    return check(dq)


def training_calls(runner: Runner, input_sets: list[Inputs]) -> list[Callable]:
    """Forward and backward of q, k, v in each call, as one training step of the layer runs."""

    def step(leaves, grad_out):
        with runner.scope():
            return torch.autograd.grad(runner.forward(*leaves), leaves, grad_out)

    return [functools.partial(step, [t.detach().requires_grad_() for t in inputs],
                              torch.randn_like(inputs[0]))
            for inputs in input_sets]
