"""Where the numbers come from: machine, driver, library versions."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess

import torch

import vsa
from vsa.support import cuda_forward_kernel_or_reason

from .cpu_facts import cpu_facts


def _command(*argv: str, cwd: str | None = None) -> str:
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "unknown"


def _commit(package_dir: str) -> str:
    """The commit measured: VSA_COMMIT where the caller knows it (scripts/gpu.sh: the device copy
    has no .git), else git, but only when vsa runs from this project's checkout, not from a wheel
    installed inside some other repository; with "-dirty" when tracked files differ from it."""
    if os.environ.get("VSA_COMMIT"):
        return os.environ["VSA_COMMIT"]
    top = _command("git", "rev-parse", "--show-toplevel", cwd=package_dir)
    if top == "unknown" or os.path.join(top, "python", "vsa") != package_dir:
        return "unknown"
    head = _command("git", "rev-parse", "HEAD", cwd=package_dir)
    # `git status --porcelain` prints nothing for a clean tree, which _command gives as "unknown".
    dirty = _command("git", "status", "--porcelain", "--untracked-files=no", cwd=package_dir) != "unknown"
    return head + "-dirty" if head != "unknown" and dirty else head


def _cpu_threads() -> int:
    """The threads vsa's CPU backend runs on: VSA_NUM_THREADS when it is a count in [1, 4096]
    (it overrides), else torch's, which the ops pass on."""
    value = os.environ.get("VSA_NUM_THREADS", "")
    return int(value) if value.isdigit() and 1 <= int(value) <= 4096 else torch.get_num_threads()


def environment(device: torch.device) -> dict:
    package_dir = os.path.dirname(os.path.abspath(vsa.__file__))
    env = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": device.type,
        "host": platform.node(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_threads": _cpu_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "vsa_version": vsa.__version__,
        "vsa_cuda_compiled": vsa.cuda_compiled(),
        "vsa_cuda_archs": vsa.cuda_archs(),
        "vsa_commit": _commit(package_dir),
    }
    if device.type == "cpu":
        env.update(cpu_facts())
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update({
            "gpu": props.name,
            "gpu_capability": f"sm_{props.major}{props.minor}",
            "gpu_memory_gib": round(props.total_memory / 2**30, 1),
            "driver": _command("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader",
                               f"--id={device.index or 0}"),
            "cuda_runtime": torch.version.cuda,
            "torch_cuda_archs": torch.cuda.get_arch_list(),
            "vsa_cuda_forward_kernel": cuda_forward_kernel_or_reason(device.index or 0),
        })
    return env
