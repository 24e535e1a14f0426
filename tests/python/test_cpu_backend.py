"""The CPU backend's settings and facts: its thread count follows torch's, what it computes with,
and what `vsa bench` prints of them."""

import json

import pytest
import torch

import vsa
from attention_reference import TOLERANCE, make_problem, reference_attention, rel_error
from vsa.bench.cli import main


@pytest.fixture
def torch_threads():
    """Restores torch's thread count and vsa's own setting after a test changes them."""
    saved = torch.get_num_threads()
    yield
    torch.set_num_threads(saved)
    vsa.set_cpu_threads(0)


@pytest.mark.parametrize("threads", [1, 3])
def test_ops_use_torchs_thread_count(gen, monkeypatch, torch_threads, threads):
    monkeypatch.delenv("VSA_NUM_THREADS", raising=False)
    torch.set_num_threads(threads)
    p = make_problem(gen, heads=2)
    out, _ = vsa.block_sparse_attn(p.q, p.k, p.v, *p.lists)
    assert vsa.cpu_threads() == threads
    ref_out, _ = reference_attention(p.q, p.k, p.v, *p.lists)
    assert rel_error(out, ref_out) <= TOLERANCE[p.q.dtype]


def test_environment_overrides_the_setting(monkeypatch, torch_threads):
    monkeypatch.setenv("VSA_NUM_THREADS", "1")
    vsa.set_cpu_threads(2)
    assert vsa.cpu_threads() == 1


@pytest.mark.parametrize("bad", [-1, 4097])
def test_set_cpu_threads_refuses_bad_counts(torch_threads, bad):
    with pytest.raises(ValueError, match="'threads'"):
        vsa.set_cpu_threads(bad)


def test_backend_info_names_the_library_and_simd_level():
    info = vsa.cpu_backend_info()
    assert info["math_library"].startswith("OpenBLAS 0.3.")
    assert info["math_library"].endswith(" kernels)")
    assert info["simd"] in ("avx512f", "avx2", "baseline")


def test_bench_header_and_json_name_cpu_threads_simd_and_library(tmp_path, capsys):
    out_dir = tmp_path / "bench"
    argv = ["--device", "cpu", "--case", "cpu-synthetic", "--iters", "1", "--warmup", "0",
            "--check-blocks", "2", "--backends", "vsa,dense-sdpa", "--out", str(out_dir)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    info = vsa.cpu_backend_info()
    header = printed.splitlines()[0]
    assert f"({torch.get_num_threads()} threads, SIMD {info['simd']}, {info['math_library']}" in header
    assert "of the fp32 GEMM rate" in printed
    env = json.loads((out_dir / "results.json").read_text())["environment"]
    assert env["cpu_simd"] == info["simd"] and env["cpu_math_library"] == info["math_library"]
    assert env["cpu_model"] and env["cpu_fp32_gemm_gflops"] > 0
    assert env["cpu_fp32_gemm_by"] in ("torch.mm", "numpy matmul")
    assert (out_dir / "results.png").stat().st_size > 0
