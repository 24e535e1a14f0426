"""Argument handling shared by the torch and the numpy front ends (imports no torch).

Errors raised here read like the C++ core's: ``vsa: invalid argument '<arg>':
expected <what>, got <what>``.
"""

from __future__ import annotations

import math
import operator
import os

LAYOUTS = ("bhsd", "bshd")
BACKENDS = ("auto", "cpu", "cuda")


def invalid_argument(argument: str, expected: str, got: object) -> ValueError:
    return ValueError(f"vsa: invalid argument '{argument}': expected {expected}, got {got}")


def scale_argument(scale: float | None) -> float:
    """The scale as the C++ core takes it, where 0 stands for the default 1/sqrt(D).

    An explicit 0 would silently become that default, so it is refused.
    """
    if scale is None:
        return 0.0
    value = float(scale)
    if value == 0.0 or not math.isfinite(value):
        raise invalid_argument("scale", "a nonzero finite number or None (1/sqrt(D))", scale)
    return value


def count_value(value: object) -> int | None:
    """value as an int when it is a whole count (an int, a numpy integer), else None: a bool or
    a fraction is not one (int() would have made 2.5 a silent 2)."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def topk_argument(topk: object, num_kv_blocks: int) -> int:
    """topk as an int in [1, NK], or the error naming it."""
    value = count_value(topk)
    if value is None or not 1 <= value <= num_kv_blocks:
        raise invalid_argument("topk", f"a block count in [1, NK = {num_kv_blocks}]", repr(topk))
    return value


def lse_shape(q_shape, layout: str) -> tuple[int, ...]:
    """[B, H, Sq] for a q of either layout.

    For a q that is not rank 4 (or an unknown layout) this gives an empty
    shape: the core then rejects q (or the layout) with its own message.
    """
    if len(q_shape) != 4 or layout not in LAYOUTS:
        return (0,)
    batch, second, third, _ = q_shape
    return (batch, second, third) if layout == "bhsd" else (batch, third, second)


def requested_backend() -> str:
    """VSA_BACKEND as vsa.dispatch reads it (here, without torch, for `vsa info`)."""
    choice = os.environ.get("VSA_BACKEND", "auto").strip().lower() or "auto"
    if choice not in BACKENDS:
        raise invalid_argument("VSA_BACKEND", "auto, cpu or cuda", repr(choice))
    return choice
