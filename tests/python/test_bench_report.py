"""vsa bench's table: forward and backward side by side, vsa against the fastest FastVideo peer."""

import pytest

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
