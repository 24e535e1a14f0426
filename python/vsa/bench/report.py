"""Attention results: the terminal table, results.json, results.csv and the time-vs-sparsity plot
(the writers also take layer results, which have no plot)."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
from dataclasses import dataclass

from .peers import DENSE_BASELINE, FASTVIDEO_PEERS
from .tables import attach_ratios, grid, groups, num, short, versus_line


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
    # This time / the fastest FastVideo kernel's at the same selection (below 1: faster).
    vs_fastvideo_fwd: float | None = None
    vs_fastvideo_bwd: float | None = None
    rel_error: float | None = None  # vs float64 on sampled query blocks; sparse backends only
    bwd_rel_error: float | None = None  # dq of the same blocks' rows, vs float64 (reference.py)
    note: str = ""  # why a number is missing

    def timings(self) -> list[str]:
        """What the progress line shows of a row that ran."""
        shown = [f"fwd {self.fwd_ms:.3f} ms ({self.fwd_tflops:.4g} TFLOP/s)"]
        if self.bwd_ms is not None:
            shown.append(f"bwd {self.bwd_ms:.3f} ms ({self.bwd_tflops:.4g} TFLOP/s)")
        return shown


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


def attach_fastvideo_ratios(results: list[Result]) -> None:
    attach_ratios(results, (("fwd_ms", "vs_fastvideo_fwd"), ("bwd_ms", "vs_fastvideo_bwd")),
                  FASTVIDEO_PEERS, key=_selection)


def _selection(r: Result) -> tuple:
    return r.case, r.sparse, r.topk


_COLUMNS = ("keep", "backend", "fwd ms", "TFLOP/s", "x dense", "/best FV", "bwd ms", "TFLOP/s",
            "x dense", "/best FV", "rel err", "note")


def _cells(r: Result) -> tuple[str, ...]:
    keep = f"{r.topk} ({r.keep:.1%})" if r.sparse else "dense"
    if r.fwd_ms is None:  # the peer did not run: one cell says why
        return keep, r.backend, f"n/a ({short(r.note)})"
    return (keep, r.backend,
            num(r.fwd_ms, ".3f"), num(r.fwd_tflops, ".4g"), num(r.speedup_fwd, ".2f"),
            num(r.vs_fastvideo_fwd, ".3f"),
            num(r.bwd_ms, ".3f"), num(r.bwd_tflops, ".4g"), num(r.speedup_bwd, ".2f"),
            num(r.vs_fastvideo_bwd, ".3f"),
            num(r.rel_error, ".2e") if r.sparse else "-", short(r.note))


def table(results: list[Result]) -> str:
    """One block per case: every row, then per selection vsa's time over the fastest FastVideo
    kernel's, forward and backward."""
    lines = []
    for rows in groups(results, key=lambda r: r.case):
        first = rows[0]
        lines.append("")
        lines.append(f"{first.case}: B{first.batch} H{first.heads} D{first.head_dim} "
                     f"{first.dtype} blk{first.block_size}, {first.num_blocks} blocks, "
                     f"S={first.seq_len} ({first.valid_tokens} real tokens)")
        lines += grid(_COLUMNS, [_cells(r) for r in rows])
        for selection in groups([r for r in rows if r.sparse], key=_selection):
            lines.append(versus_line(selection, "vsa", (("fwd_ms", "fwd"), ("bwd_ms", "bwd")),
                                     FASTVIDEO_PEERS, "FastVideo")
                         + f"  [topk {selection[0].topk}]")
    return "\n".join(lines)


def write_json(path: str, environment: dict, settings: dict, results: list) -> None:
    with open(path, "w") as f:
        json.dump({"environment": environment, "settings": settings,
                   "results": [dataclasses.asdict(r) for r in results]}, f, indent=2)
        f.write("\n")


def write_csv(path: str, results: list) -> None:
    """One row per result, its scalar fields only (results.json has the rest)."""
    rows = [dataclasses.asdict(r) for r in results]
    nested = {k for row in rows for k, v in row.items() if isinstance(v, (dict, list))}
    names = [k for k in (rows[0] if rows else {}) if k not in nested]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=names, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


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


def write_all(out_dir: str, environment: dict, settings: dict, results: list) -> list[str]:
    """Writes results.json, results.csv and, for attention results, results.png; returns lines
    for the terminal saying what was written."""
    os.makedirs(out_dir, exist_ok=True)
    write_json(os.path.join(out_dir, "results.json"), environment, settings, results)
    write_csv(os.path.join(out_dir, "results.csv"), results)
    where = environment.get("gpu") or (f"{environment['cpu_model']} ({environment['cpu_threads']} "
                                       f"threads, {environment['cpu_simd']})")
    skipped = "the layer results have no plot" if not all(isinstance(r, Result)
                                                          for r in results) else \
        write_plot(os.path.join(out_dir, "results.png"), results,
                   f"vsa bench on {where}, torch {environment['torch']}")
    written = "results.json, results.csv" + ("" if skipped else ", results.png")
    return [f"wrote {written} to {out_dir}"] + ([f"plot skipped: {skipped}"] if skipped else [])
