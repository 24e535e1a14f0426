"""Results: the terminal table, results.json, results.csv and the time-vs-sparsity plot."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
from dataclasses import dataclass

from .peers import DENSE_BASELINE


@dataclass
class Result:
    case: str
    backend: str
    sparse: bool
    batch: int
    heads: int
    head_dim: int
    block_size: int
    num_blocks: int
    seq_len: int  # padded, what the sparse kernels see
    valid_tokens: int  # what dense attention runs over
    topk: int  # KV blocks per query block; num_blocks for dense
    keep: float  # topk / num_blocks
    dtype: str
    fwd_ms: float | None = None
    fwd_tflops: float | None = None
    bwd_ms: float | None = None
    bwd_tflops: float | None = None
    speedup_fwd: float | None = None  # dense baseline time / this time
    speedup_bwd: float | None = None
    rel_error: float | None = None  # vs float64 on sampled query blocks; sparse backends only
    note: str = ""  # why a number is missing


def attach_speedups(results: list[Result]) -> None:
    """Speed-up of every row of a case over its dense baseline, forward and backward apart."""
    for case in {r.case for r in results}:
        rows = [r for r in results if r.case == case]
        dense = [r for r in rows if not r.sparse]
        for field, out in (("fwd_ms", "speedup_fwd"), ("bwd_ms", "speedup_bwd")):
            named = [getattr(r, field) for r in dense if r.backend == DENSE_BASELINE]
            timed = [getattr(r, field) for r in dense if getattr(r, field) is not None]
            base = named[0] if named and named[0] is not None else min(timed, default=None)
            if base is None:
                continue
            for r in rows:
                if getattr(r, field) is not None:
                    setattr(r, out, base / getattr(r, field))


def _num(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


_COLUMNS = ("keep", "backend", "fwd ms", "TFLOP/s", "x dense", "bwd ms", "TFLOP/s", "x dense",
            "rel err", "note")


def _cells(r: Result) -> tuple[str, ...]:
    keep = f"{r.topk} ({r.keep:.1%})" if r.sparse else "dense"
    if r.fwd_ms is None:  # the peer did not run: one cell says why
        return keep, r.backend, f"n/a ({_short(r.note)})"
    return (keep, r.backend,
            _num(r.fwd_ms, ".3f"), _num(r.fwd_tflops, ".4g"), _num(r.speedup_fwd, ".2f"),
            _num(r.bwd_ms, ".3f"), _num(r.bwd_tflops, ".4g"), _num(r.speedup_bwd, ".2f"),
            _num(r.rel_error, ".2e") if r.sparse else "-", _short(r.note))


def _short(note: str, width: int = 72) -> str:
    """Notes are cut to keep the table readable; results.json keeps them whole."""
    return note if len(note) <= width else note[: width - 3] + "..."


def table(results: list[Result]) -> str:
    lines = []
    for case in dict.fromkeys(r.case for r in results):
        rows = [r for r in results if r.case == case]
        first = rows[0]
        lines.append("")
        lines.append(f"{case}: B{first.batch} H{first.heads} D{first.head_dim} {first.dtype} "
                     f"blk{first.block_size}, {first.num_blocks} blocks, S={first.seq_len} "
                     f"({first.valid_tokens} real tokens)")
        cells = [_COLUMNS] + [_cells(r) for r in rows]
        # An n/a row's one long cell spills past the columns instead of widening them.
        widths = [max(len(row[i]) for row in cells if len(row) > 3 or i < 2)
                  for i in range(len(_COLUMNS))]
        for row in cells:
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    return "\n".join(lines)


def write_json(path: str, environment: dict, settings: dict, results: list[Result]) -> None:
    with open(path, "w") as f:
        json.dump({"environment": environment, "settings": settings,
                   "results": [dataclasses.asdict(r) for r in results]}, f, indent=2)
        f.write("\n")


def write_csv(path: str, results: list[Result]) -> None:
    names = [f.name for f in dataclasses.fields(Result)]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=names)
        writer.writeheader()
        writer.writerows(dataclasses.asdict(r) for r in results)


def write_plot(path: str, results: list[Result], title: str) -> str | None:
    """Forward time against the fraction of KV blocks kept, one panel per case: sparse
    backends as lines, dense backends as flat references. Returns why it was skipped, if so."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed"
    cases = list(dict.fromkeys(r.case for r in results))
    cols = min(3, len(cases))
    rows_of_panels = math.ceil(len(cases) / cols)
    fig, axes = plt.subplots(rows_of_panels, cols, figsize=(5.5 * cols, 4.2 * rows_of_panels),
                             squeeze=False)
    for ax in axes.flat[len(cases):]:
        ax.set_visible(False)
    for ax, case in zip(axes.flat, cases):
        rows = [r for r in results if r.case == case and r.fwd_ms is not None]
        for backend in dict.fromkeys(r.backend for r in rows):
            mine = sorted((r for r in rows if r.backend == backend), key=lambda r: r.keep)
            if mine[0].sparse:
                ax.plot([100 * r.keep for r in mine], [r.fwd_ms for r in mine], marker="o",
                        label=backend)
            else:
                ax.axhline(mine[0].fwd_ms, linestyle="--", linewidth=1, label=backend,
                           color="gray" if backend != DENSE_BASELINE else "black")
        ax.set_xlim(0, 102)
        ax.set_xlabel("KV blocks kept (%)")
        ax.set_ylabel("forward time (ms)")
        ax.set_yscale("log")
        ax.set_title(case, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def write_all(out_dir: str, environment: dict, settings: dict, results: list[Result]) -> list[str]:
    """Writes the three files; returns lines for the terminal saying what was written."""
    os.makedirs(out_dir, exist_ok=True)
    write_json(os.path.join(out_dir, "results.json"), environment, settings, results)
    write_csv(os.path.join(out_dir, "results.csv"), results)
    where = environment.get("gpu", f"CPU ({environment['cpu_threads']} threads)")
    skipped = write_plot(os.path.join(out_dir, "results.png"), results,
                         f"vsa bench on {where}, torch {environment['torch']}")
    written = "results.json, results.csv" + ("" if skipped else ", results.png")
    return [f"wrote {written} to {out_dir}"] + ([f"plot skipped: {skipped}"] if skipped else [])
