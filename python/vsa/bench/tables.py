"""Pieces both reports use: aligned text tables, and ratios of one backend's times to the fastest
of a set of peers in the same run (vsa against FastVideo)."""

from __future__ import annotations

from typing import Callable, Hashable, Sequence


def num(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def short(note: str, width: int = 72) -> str:
    """Notes are cut to keep the table readable; results.json keeps them whole."""
    return note if len(note) <= width else note[: width - 3] + "..."


def grid(columns: Sequence[str], rows: list[Sequence[str]]) -> list[str]:
    """Left-aligned columns. A row shorter than the header ends in one cell that says why the
    backend did not run; that cell spills past the columns instead of widening them."""
    cells = [list(columns)] + [list(r) for r in rows]
    widths = [max((len(r[i]) for r in cells
                   if len(r) == len(columns) or i < len(r) - 1), default=0)
              for i in range(len(columns))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]


def fastest(rows: list, field: str, backends: Sequence[str]):
    """The row of one of `backends` with the smallest `field`, or None if none has it."""
    timed = [r for r in rows if r.backend in backends and getattr(r, field) is not None]
    return min(timed, key=lambda r: getattr(r, field), default=None)


def groups(rows: list, key: Callable[[object], Hashable]) -> list[list]:
    """rows split by key, in order of first appearance."""
    out: dict = {}
    for r in rows:
        out.setdefault(key(r), []).append(r)
    return list(out.values())


def attach_ratios(rows: list, pairs: Sequence[tuple[str, str]], backends: Sequence[str],
                  key: Callable[[object], Hashable]) -> None:
    """For every (field, out) pair and every group of rows of the same key: out = this row's field
    / the fastest field among `backends` in the group (below 1: faster than all of them)."""
    for group in groups(rows, key):
        for field, out in pairs:
            best = fastest(group, field, backends)
            for r in group:
                if best is not None and getattr(r, field) is not None:
                    setattr(r, out, getattr(r, field) / getattr(best, field))


def versus_line(group: list, ours: str, fields: Sequence[tuple[str, str]],
                backends: Sequence[str], label: str) -> str:
    """'vsa / best FastVideo: fwd 1.04 (fastvideo-tk), bwd 0.91 (fastvideo-triton)'."""
    mine = next((r for r in group if r.backend == ours), None)
    if all(fastest(group, field, backends) is None for field, _ in fields):
        return f"  {ours} / best {label}: n/a (none of {', '.join(backends)} ran)"
    parts = []
    for field, name in fields:
        best = fastest(group, field, backends)
        value = getattr(mine, field, None) if mine is not None else None
        if best is None:
            parts.append(f"{name} n/a (no {label} {name})")
        elif value is None:
            parts.append(f"{name} n/a ({ours} did not run)")
        else:
            parts.append(f"{name} {value / getattr(best, field):.3f} ({best.backend})")
    return f"  {ours} / best {label}: " + ", ".join(parts)
