"""vsa bench case definitions: counts derived from the latent shapes agree with the library."""

import math

import pytest

import vsa
from vsa.bench.cases import CASES, DEFAULT_CPU_CASES, DEFAULT_GPU_CASES, latent_case


def test_wan_480p_counts():
    case = CASES["wan2.1-1.3b-480p"]
    assert case.latent == (21, 30, 52)
    assert case.num_blocks == 624  # 6 x 8 x 13 tiles of 4x4x4
    assert case.seq_len == 39936
    assert case.valid_tokens == 21 * 30 * 52
    assert (case.batch, case.heads, case.head_dim, case.topk) == (1, 12, 128, 63)
    assert case.partial_blocks


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.latent is not None])
def test_latent_cases_match_library_metadata(name):
    case = CASES[name]
    vbs = vsa.build_vsa_metadata(case.latent, tile_size=case.tile).variable_block_sizes
    assert vbs.numel() == case.num_blocks
    assert int(vbs.sum()) == math.prod(case.latent) == case.valid_tokens
    assert int(vbs.max()) == case.block_size == math.prod(case.tile)
    assert int(vbs.min()) < case.block_size  # every latent case has real partial blocks


def test_synthetic_anchor_rows():
    # The anchor rows: B1 H16 S49152 = 768 full blocks at topk 64 / 192 / 768; B2 H12 S16384 topk 32.
    for name, topk in (("synthetic-49k", 64), ("synthetic-49k-top192", 192),
                       ("synthetic-49k-top768", 768)):
        case = CASES[name]
        assert (case.batch, case.heads, case.seq_len, case.num_blocks, case.topk) == \
            (1, 16, 49152, 768, topk)
        assert not case.partial_blocks
    b2 = CASES["synthetic-b2-16k"]
    assert (b2.batch, b2.heads, b2.seq_len, b2.topk) == (2, 12, 16384, 32)
    assert CASES["synthetic-49k-blk128"].num_blocks == 384


def test_flop_counts_follow_fastvideo():
    case = CASES["synthetic-49k"]
    assert case.sparse_flops() == 4 * 16 * 128 * 49152 * (64 * 64)
    wan = CASES["wan2.1-1.3b-480p"]
    assert wan.dense_flops() == 4 * 12 * 128 * (21 * 30 * 52) ** 2  # dense runs on real tokens


def test_block_size_change_keeps_the_fraction():
    wan = CASES["wan2.1-1.3b-480p"].with_block_size(128)
    assert wan.num_blocks == 6 * 8 * 7 and wan.seq_len == wan.num_blocks * 128
    assert wan.topk == round(63 / 624 * wan.num_blocks)
    assert CASES["synthetic-49k"].with_block_size(128).topk == 32


def test_custom_latent_and_defaults():
    case = latent_case((5, 6, 7))
    assert case.num_blocks == 2 * 2 * 2 and case.valid_tokens == 210 and case.topk == 1
    assert set(DEFAULT_GPU_CASES) | set(DEFAULT_CPU_CASES) <= set(CASES)
    assert all(CASES[n].cpu for n in DEFAULT_CPU_CASES)
    assert not any(CASES[n].cpu for n in DEFAULT_GPU_CASES)
