"""Layer results: one row per backend and top-k, the ratios the layer's goals are stated in, and
where vsa's layer spends its forward time."""

from __future__ import annotations

from dataclasses import dataclass

from .layer_peers import FINE_KERNEL
from .peers import FASTVIDEO_PEERS
from .stages import STAGES
from .tables import attach_ratios, grid, groups, num, short, versus_line

FINE_GOAL = 1.10  # vsa's layer forward over its fine kernel alone, on Wan 480p (issue 9)


@dataclass
class LayerResult:
    case: str
    backend: str
    batch: int
    heads: int
    head_dim: int
    block_size: int
    num_blocks: int
    seq_len: int
    valid_tokens: int
    topk: int
    keep: float
    dtype: str
    fwd_ms: float | None = None  # forward, no autograd
    fwdbwd_ms: float | None = None  # forward + backward of q, k, v
    fwd_per_fine: float | None = None  # fwd_ms / vsa's fine kernel alone on the same selection
    # vsa only: the same ratio with the layer and the fine kernel timed alternately
    fwd_per_fine_alternating: float | None = None
    vs_fastvideo_fwd: float | None = None  # this / the fastest FastVideo layer (below 1: faster)
    vs_fastvideo_fwdbwd: float | None = None
    rel_error: float | None = None  # vs the float64 layer (vsa-fine: vs its fine stage alone)
    note: str = ""
    # vsa only: forward time by stage, summed over what ran ('CUDA kernels' on the GPU, top-level
    # 'CPU ops' on the CPU: stage_source), their total, and each of one call with its stage.
    stage_ms: dict[str, float] | None = None
    stage_total_ms: float | None = None
    stage_source: str = ""
    stage_kernels: list[dict] | None = None

    def timings(self) -> list[str]:
        """What the progress line shows of a row that ran."""
        shown = [f"fwd {self.fwd_ms:.3f} ms"]
        if self.fwdbwd_ms is not None:
            shown.append(f"fwd+bwd {self.fwdbwd_ms:.3f} ms")
        return shown


def _selection(r: LayerResult) -> tuple:
    return r.case, r.topk


def attach_layer_ratios(results: list[LayerResult]) -> None:
    attach_ratios(results, (("fwd_ms", "fwd_per_fine"),), (FINE_KERNEL,), key=_selection)
    attach_ratios(results, (("fwd_ms", "vs_fastvideo_fwd"), ("fwdbwd_ms", "vs_fastvideo_fwdbwd")),
                  FASTVIDEO_PEERS, key=_selection)


_COLUMNS = ("backend", "fwd ms", "x fine", "/best FV", "fwd+bwd ms", "/best FV", "rel err",
            "note")


def _cells(r: LayerResult) -> tuple[str, ...]:
    if r.fwd_ms is None:
        return r.backend, f"n/a ({short(r.note)})"
    return (r.backend, num(r.fwd_ms, ".3f"), num(r.fwd_per_fine, ".3f"),
            num(r.vs_fastvideo_fwd, ".3f"), num(r.fwdbwd_ms, ".3f"),
            num(r.vs_fastvideo_fwdbwd, ".3f"), num(r.rel_error, ".2e"), short(r.note))


def stage_line(r: LayerResult) -> str:
    """'vsa layer forward by stage (...): coarse 0.190 ms (8.1%), selection ...'; 'other' only
    when something landed there."""
    parts = [f"{s} {r.stage_ms[s]:.3f} ms ({r.stage_ms[s] / r.stage_total_ms:.1%})"
             for s in STAGES if r.stage_ms[s] or s != "other"]
    return (f"  vsa layer forward by stage ({r.stage_source}: {r.stage_total_ms:.3f} ms per call; "
            f"timed {r.fwd_ms:.3f} ms): " + ", ".join(parts))


def _against_goal(ratio: float) -> str:
    verdict = "meets" if ratio <= FINE_GOAL else "misses"
    return f"{ratio:.3f} ({verdict} the goal <= {FINE_GOAL:.2f})"


def layer_table(results: list[LayerResult]) -> str:
    lines = []
    for rows in groups(results, key=_selection):
        first = rows[0]
        lines.append("")
        lines.append(f"{first.case} layer: B{first.batch} H{first.heads} D{first.head_dim} "
                     f"{first.dtype} blk{first.block_size}, {first.num_blocks} blocks, "
                     f"topk {first.topk} ({first.keep:.1%}), S={first.seq_len} "
                     f"({first.valid_tokens} real tokens)")
        lines += grid(_COLUMNS, [_cells(r) for r in rows])
        ours = next((r for r in rows if r.backend == "vsa"), None)
        if ours is not None and ours.fwd_per_fine is not None:
            lines.append(f"  vsa layer fwd / vsa fine kernel fwd: {_against_goal(ours.fwd_per_fine)}")
        if ours is not None and ours.fwd_per_fine_alternating is not None:
            lines.append("  the same, the two timed alternately: "
                         f"{_against_goal(ours.fwd_per_fine_alternating)}")
        lines.append(versus_line(rows, "vsa", (("fwd_ms", "fwd"), ("fwdbwd_ms", "fwd+bwd")),
                                 FASTVIDEO_PEERS, "FastVideo layer"))
        if ours is not None and ours.stage_total_ms:
            lines.append(stage_line(ours))
    if results:
        lines.append("")
        lines.append("rel err: against the float64 layer on sampled query blocks (vsa-fine: its "
                     "fine stage on the same selection). A layer whose coarse scores round "
                     "differently (FastVideo and torch-flex: bf16) picks other blocks at "
                     "near-ties, which shows here as error.")
    return "\n".join(lines)
