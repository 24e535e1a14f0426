"""vsa bench's tables: forward and backward side by side, vsa against the fastest FastVideo peer,
the layer's ratios and stage split."""

import pytest

from vsa.bench.layer_report import LayerResult, attach_layer_ratios, layer_table
from vsa.bench.report import Result, attach_fastvideo_ratios, attach_speedups, table

CASE = dict(case="wan", batch=1, heads=12, head_dim=128, block_size=64, num_blocks=624,
            seq_len=39936, valid_tokens=32760, dtype="bf16")


def _sparse(backend, topk, fwd, bwd, note=""):
    return Result(backend=backend, sparse=True, topk=topk, keep=topk / 624, fwd_ms=fwd,
                  bwd_ms=bwd, note=note, **CASE)


def _attention_rows():
    return [
        _sparse("vsa", 63, 2.0, 6.0),
        _sparse("fastvideo-tk", 63, 2.5, 8.0),
        _sparse("fastvideo-triton", 63, 3.0, 7.5),
        _sparse("vsa", 126, 4.0, None, note="backward: UnsupportedError: no CUDA backward"),
        _sparse("fastvideo-tk", 126, None, None, note="ThunderKittens kernel: batch 1 only"),
        _sparse("fastvideo-triton", 126, 5.0, 15.0),
        Result(backend="dense-cudnn", sparse=False, topk=624, keep=1.0, fwd_ms=10.0, bwd_ms=25.0,
               **CASE),
    ]


def test_vsa_is_quoted_against_the_fastest_fastvideo_peer_per_selection():
    rows = _attention_rows()
    attach_speedups(rows)
    attach_fastvideo_ratios(rows)
    vsa63, tk63, triton63, vsa126, _, triton126, dense = rows
    assert vsa63.vs_fastvideo_fwd == pytest.approx(2.0 / 2.5)  # TK fastest forward
    assert vsa63.vs_fastvideo_bwd == pytest.approx(6.0 / 7.5)  # Triton fastest backward
    assert triton63.vs_fastvideo_fwd == pytest.approx(3.0 / 2.5)
    assert vsa126.vs_fastvideo_fwd == pytest.approx(4.0 / 5.0)  # TK n/a: Triton is the best
    assert vsa126.vs_fastvideo_bwd is None
    assert dense.vs_fastvideo_fwd is None and dense.speedup_fwd == pytest.approx(1.0)

    text = table(rows)
    header = next(line for line in text.splitlines() if "backend" in line).split()
    assert header[:4] == ["keep", "backend", "fwd", "ms"] and header.count("/best") == 2
    assert header.index("bwd") > header.index("/best")  # forward columns, then backward's
    assert "vsa / best FastVideo: fwd 0.800 (fastvideo-tk), bwd 0.800 (fastvideo-triton)" \
        "  [topk 63]" in text
    assert "vsa / best FastVideo: fwd 0.800 (fastvideo-triton), bwd n/a (vsa did not run)" \
        "  [topk 126]" in text
    assert "n/a (ThunderKittens kernel: batch 1 only)" in text


def _layer(backend, fwd, fwdbwd, **extra):
    return LayerResult(backend=backend, topk=63, keep=63 / 624, fwd_ms=fwd, fwdbwd_ms=fwdbwd,
                       **CASE, **extra)


def test_layer_table_states_the_goals():
    stage_ms = {"coarse": 0.2, "selection": 0.1, "fine": 2.0, "combine": 0.1, "other": 0.0}
    rows = [_layer("vsa", 2.4, 7.0, stage_ms=stage_ms, stage_total_ms=2.4,
                   stage_source="CUDA kernels", fwd_per_fine_alternating=1.08),
            _layer("vsa-fine", 2.0, 6.0),
            _layer("fastvideo-tk", 2.5, 11.3),
            _layer("fastvideo-triton", 3.2, 11.4),
            _layer("torch-flex", None, None, note="compiled FlexAttention: OOM")]
    attach_layer_ratios(rows)
    vsa, fine, tk, triton, _ = rows
    assert vsa.fwd_per_fine == pytest.approx(1.2) and fine.fwd_per_fine == pytest.approx(1.0)
    assert tk.fwd_per_fine == pytest.approx(1.25)
    assert vsa.vs_fastvideo_fwd == pytest.approx(2.4 / 2.5)
    assert vsa.vs_fastvideo_fwdbwd == pytest.approx(7.0 / 11.3)

    text = layer_table(rows)
    assert "wan layer: B1 H12 D128 bf16 blk64, 624 blocks, topk 63 (10.1%)" in text
    header = next(line for line in text.splitlines() if "backend" in line).split()
    assert header == ["backend", "fwd", "ms", "x", "fine", "/best", "FV", "fwd+bwd", "ms",
                      "/best", "FV", "rel", "err", "note"]
    assert "vsa layer fwd / vsa fine kernel fwd: 1.200 (misses the goal <= 1.10)" in text
    assert "the same, the two timed alternately: 1.080 (meets the goal <= 1.10)" in text
    assert "vsa / best FastVideo layer: fwd 0.960 (fastvideo-tk), fwd+bwd 0.619 " \
        "(fastvideo-tk)" in text
    assert "vsa layer forward by stage (CUDA kernels: 2.400 ms per call; timed 2.400 ms): " \
        "coarse 0.200 ms (8.3%), selection 0.100 ms (4.2%), fine 2.000 ms (83.3%), " \
        "combine 0.100 ms (4.2%)" in text
    stage_line = next(line for line in text.splitlines() if "by stage" in line)
    assert "other" not in stage_line  # shown only when something landed there
    assert "torch-flex        n/a (compiled FlexAttention: OOM)" in text
