"""vsa bench's command line: flag errors, --list, and a whole CPU run with --out."""

import csv
import json
import subprocess

import pytest
import torch

from vsa.bench.cli import main


@pytest.mark.parametrize("argv, flag", [
    (["--block-size", "96"], "--block-size"),
    (["--head-dim", "96"], "--head-dim"),
    (["--topk", "0"], "--topk"),
    (["--case", "cpu-synthetic", "--topk", "33"], "--topk"),  # more than its 32 blocks
    (["--case", "no-such-model"], "--case"),
    (["--batch", "-1"], "--batch"),
    (["--heads", "0"], "--heads"),
    (["--sparsity", "0"], "--sparsity"),
    (["--sparsity", "0.1,1.5"], "--sparsity"),
    (["--sparsity", "abc"], "--sparsity"),
    (["--topk", "4", "--sparsity", "0.5"], "--sparsity"),
    (["--latent", "21x30"], "--latent"),
    (["--dtype", "int8"], "--dtype"),
    (["--backends", "vsa,nonesuch"], "--backends"),
    (["--iters", "0"], "--iters"),
    (["--device", "tpu"], "--device"),
    (["--op", "mlp"], "--op"),
    (["--op", "layer", "--selection", "local"], "--selection"),  # the layer selects its own
    (["--op", "layer", "--backends", "vsa,dense-sdpa"], "--backends"),  # not a layer backend
    (["--backends", "vsa-fine"], "--backends"),  # a layer backend only
])
def test_impossible_flags_name_the_flag(argv, flag, capsys):
    assert main(["--device", "cpu", *argv] if "--device" not in argv else argv) == 2
    err = capsys.readouterr().err
    assert "usage: vsa bench" in err and f"argument {flag}" in err, err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_cuda_flags_without_a_gpu(capsys):
    assert main(["--device", "cuda"]) == 2
    assert "argument --device" in capsys.readouterr().err


def test_fp32_is_cpu_only(capsys, monkeypatch):
    # The check is argument parsing, made before anything runs on the device: torch seeing a
    # GPU is all it takes to reach it, so it runs on machines without one (CI) too.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert main(["--device", "cuda", "--dtype", "fp32"]) == 2
    assert "argument --dtype" in capsys.readouterr().err


def test_list_shows_counts(capsys):
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "wan2.1-1.3b-480p" in out and "blocks=624" in out and "S=39936" in out
    assert "synthetic-49k-blk128" in out and "hunyuan-720p" in out


def test_help_exits_zero(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--sparsity" in out and "--op {attention,layer}" in out


def test_cpu_run_end_to_end(tmp_path, capsys):
    out_dir = tmp_path / "bench"
    argv = ["--device", "cpu", "--case", "cpu-wan-crop", "--heads", "1", "--sparsity", "0.1,0.5",
            "--iters", "1", "--warmup", "0", "--check-blocks", "4",
            "--backends", "vsa,vsa-rows,flex,dense-sdpa", "--out", str(out_dir)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "CPU run" in captured.out and "cpu-wan-crop" in captured.out
    assert "/best FV" in captured.out and "vsa / best FastVideo: n/a" in captured.out
    assert "[cpu-wan-crop]" in captured.err  # progress goes to stderr

    for name in ("results.json", "results.csv", "results.png"):
        assert (out_dir / name).stat().st_size > 0
    data = json.loads((out_dir / "results.json").read_text())
    env = data["environment"]
    for key in ("date", "device", "torch", "vsa_version", "vsa_commit", "cpu_threads"):
        assert key in env
    assert env["device"] == "cpu"
    assert data["settings"]["sparsity"] == [0.1, 0.5]

    rows = data["results"]
    ours = [r for r in rows if r["backend"] == "vsa"]
    assert [r["topk"] for r in ours] == [6, 30]  # 10 % and 50 % of 60 blocks
    for r in ours:
        assert r["fwd_ms"] > 0 and r["bwd_ms"] > 0 and r["rel_error"] < 1e-5
        assert r["speedup_fwd"] > 0 and r["valid_tokens"] == 9 * 14 * 20
        assert r["note"] == "real query rows only (q_variable_block_sizes)"  # partial blocks, on the CPU
    # On the CPU 'vsa' already makes the layer's call, so the real-rows peer does not run again.
    real_rows = [r for r in rows if r["backend"] == "vsa-rows"]
    assert len(real_rows) == 2 and all(r["fwd_ms"] is None for r in real_rows)
    assert all(r["note"] == "the same call as 'vsa' on the CPU" for r in real_rows)
    assert all(r["vs_fastvideo_fwd"] is None for r in rows)  # FastVideo is GPU only
    flex = [r for r in rows if r["backend"] == "flex"]
    assert flex and all(r["fwd_ms"] is None and r["note"] for r in flex)  # n/a, with the reason
    dense = [r for r in rows if r["backend"] == "dense-sdpa"]
    assert len(dense) == 1 and dense[0]["speedup_fwd"] == pytest.approx(1.0)

    with open(out_dir / "results.csv") as f:
        assert len(list(csv.DictReader(f))) == len(rows)



@pytest.mark.parametrize("broken", ["zero backward", "failing backward"])
def test_a_wrong_or_failing_vsa_backward_fails_the_run(broken, monkeypatch, capsys):
    """The backward's dq is checked against float64 on the sampled rows: a backward that returns
    zeros (timed as the fastest) or raises fails the run, as a wrong forward does."""
    import vsa.bench.peers as peers
    from vsa.bench.problem import Runner

    real = peers.SPARSE_PEERS["vsa"]

    def make(problem):
        runner = real(problem)

        def broken_forward(q, k, v):
            out = runner.forward(q, k, v)
            if broken == "zero backward":
                return out.detach() + 0 * (q + k.mean() + v.mean())  # gradients of zero
            return _Raising.apply(out)

        return Runner(broken_forward, runner.scope)

    monkeypatch.setitem(peers.SPARSE_PEERS, "vsa", make)
    argv = ["--device", "cpu", "--case", "cpu-synthetic", "--iters", "1", "--warmup", "0",
            "--check-blocks", "2", "--backends", "vsa"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert ("FAIL cpu-synthetic topk 4: vsa dq rel err" in out if broken == "zero backward"
            else "FAIL cpu-synthetic topk 4: vsa did not run (backward:" in out), out


class _Raising(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("backward kernel failed")


def test_cpu_layer_run_end_to_end(tmp_path, capsys):
    out_dir = tmp_path / "layer"
    argv = ["--op", "layer", "--device", "cpu", "--heads", "1", "--iters", "1", "--warmup", "0",
            "--check-blocks", "4", "--out", str(out_dir)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "cpu-wan-crop layer: B1 H1 D64 fp32 blk64, 60 blocks, topk 12 (20.0%)" in captured.out
    assert "vsa layer fwd / vsa fine kernel fwd:" in captured.out
    assert "vsa layer forward by stage (CPU ops:" in captured.out
    assert not (out_dir / "results.png").exists() and "plot skipped" in captured.out

    data = json.loads((out_dir / "results.json").read_text())
    assert data["settings"]["op"] == "layer"
    rows = {r["backend"]: r for r in data["results"]}
    assert list(rows) == ["vsa", "vsa-fine", "fastvideo-tk", "fastvideo-triton", "torch-flex"]
    for name in ("vsa", "vsa-fine"):
        r = rows[name]
        assert r["fwd_ms"] > 0 and r["fwdbwd_ms"] > 0 and r["rel_error"] < 1e-5, r
        assert r["topk"] == 12 and r["valid_tokens"] == 9 * 14 * 20
    assert rows["vsa"]["fwd_per_fine"] == pytest.approx(rows["vsa"]["fwd_ms"] /
                                                        rows["vsa-fine"]["fwd_ms"])
    assert rows["vsa"]["fwd_per_fine_alternating"] > 0 and rows["vsa-fine"]["fwd_per_fine_alternating"] is None
    assert "the same, the two timed alternately:" in captured.out
    assert rows["vsa"]["stage_ms"]["fine"] > 0 and rows["vsa"]["stage_kernels"]
    assert rows["fastvideo-tk"]["fwd_ms"] is None and rows["fastvideo-tk"]["note"] == "CUDA only"
    # Eager FlexAttention runs the torch layer's forward on the CPU (it has no CPU backward).
    flex = rows["torch-flex"]
    assert flex["rel_error"] < 1e-5 and flex["fwdbwd_ms"] is None and "backward" in flex["note"]

    with open(out_dir / "results.csv") as f:
        header = next(csv.reader(f))
    assert "fwd_per_fine" in header and "stage_ms" not in header  # lists and dicts: JSON only


def test_python_m_entry_point():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "vsa.bench", "--list"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "wan2.1-14b-720p" in done.stdout


def test_layer_run_profiles_after_every_timing(monkeypatch, capsys):
    # The stage profiler slows the multi-kernel layer timed after it on the GPU
    # (bench/results/2026-12-02-h200-fwd-keys-last), so no timing may follow it.
    from vsa.bench import layer_run, timing

    events = []
    timed = timing.alternating_medians_ms

    def logged_timing(*args, **kwargs):
        events.append("timing")
        return timed(*args, **kwargs)

    def logged_profile(*args, **kwargs):
        events.append("profile")
        return profile(*args, **kwargs)

    profile = layer_run.profile_stages
    monkeypatch.setattr(timing, "alternating_medians_ms", logged_timing)  # median_ms calls it
    monkeypatch.setattr(layer_run, "alternating_medians_ms", logged_timing)
    monkeypatch.setattr(layer_run, "profile_stages", logged_profile)
    argv = ["--op", "layer", "--device", "cpu", "--heads", "1", "--iters", "1", "--warmup", "0",
            "--check-blocks", "0", "--backends", "vsa,vsa-fine"]
    assert main(argv) == 0
    assert "vsa layer forward by stage (CPU ops:" in capsys.readouterr().out
    # vsa's and vsa-fine's forward and forward + backward, then the two alternately.
    assert events == ["timing"] * 5 + ["profile"], events


def test_the_recorded_commit_says_when_the_tree_differs_from_it(tmp_path, monkeypatch):
    from vsa.bench.environment import _commit

    monkeypatch.delenv("VSA_COMMIT", raising=False)
    package = tmp_path / "python" / "vsa"
    package.mkdir(parents=True)
    (package / "attention.py").write_text("x = 1\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "c"]):
        subprocess.run(git + args, check=True)
    head = subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    assert _commit(str(package)) == head
    (package / "attention.py").write_text("x = 2\n")
    assert _commit(str(package)) == head + "-dirty"


def test_cpu_threads_and_the_gemm_share_say_what_ran(tmp_path, monkeypatch, capsys):
    """VSA_NUM_THREADS overrides torch's count for the CPU backend, so the record says it; the
    share of the GEMM rate says when it is of the effective count of rows vsa did not compute."""
    monkeypatch.setenv("VSA_NUM_THREADS", "1")
    argv = ["--device", "cpu", "--case", "cpu-wan-crop", "--heads", "1", "--iters", "1", "--warmup", "0",
            "--check-blocks", "2", "--backends", "vsa", "--no-backward", "--out", str(tmp_path)]
    assert main(argv) == 0
    assert json.loads((tmp_path / "results.json").read_text())["environment"]["cpu_threads"] == 1
    share = [line for line in capsys.readouterr().out.splitlines() if "of the fp32 GEMM rate" in line]
    assert share and all("effective count" in line for line in share)  # real query rows only there
