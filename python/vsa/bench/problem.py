"""What a benchmark peer is given (a Problem or a LayerProblem) and gives back (a Runner)."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Callable, ContextManager

import torch

Forward = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class Unavailable(Exception):
    """The peer cannot run this problem on this machine; the message says why."""


@dataclass
class Problem:
    """One block-sparse attention problem: the inputs' shapes and the block selection."""

    example: tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # one input set, for static checks
    block_size: int
    # The block selection; dense peers get none.
    q2k_idx: torch.Tensor | None = None
    q2k_num: torch.Tensor | None = None
    variable_block_sizes: torch.Tensor | None = None
    # The real query rows of each block of a self-attention case with partial blocks (None: no
    # partial blocks): what the VSA layer passes as q_variable_block_sizes.
    real_query_rows: torch.Tensor | None = None

    @property
    def device(self) -> torch.device:
        return self.example[0].device


@dataclass
class LayerProblem:
    """One VSA layer problem: tiled, padded q/k/v (pad tokens zero) and the layer's settings.
    Queries and keys are the same sequence, so one variable_block_sizes serves both."""

    example: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    block_size: int
    variable_block_sizes: torch.Tensor
    topk: int
    # The reference layer's selection on the example inputs: what vsa's fine kernel is timed on
    # alone (the layer's own picks differ at most at near-ties, with the same counts).
    q2k_idx: torch.Tensor
    q2k_num: torch.Tensor

    @property
    def device(self) -> torch.device:
        return self.example[0].device


@dataclass
class Runner:
    """How the benchmark calls a peer: forward(q, k, v) -> out (BHSD); every forward and every
    backward call runs inside scope(), e.g. an environment switch that picks a kernel."""

    forward: Forward
    scope: Callable[[], ContextManager] = contextlib.nullcontext

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        with self.scope():
            return self.forward(q, k, v)


@contextlib.contextmanager
def environment_variable(name: str, value: str):
    """Sets one environment variable for the duration, restoring what was there."""
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            del os.environ[name]
        else:
            os.environ[name] = previous
