"""The one place where the Python layer decides which backend runs a kernel.

By default the device holding the tensors decides (CPU tensors -> CPU
backend, CUDA tensors -> CUDA backend). The environment variable
``VSA_BACKEND`` overrides it:

- ``auto`` (default): the tensors' device.
- ``cpu``: always the CPU backend. CUDA tensors are copied to the host, run
  there and the results copied back. This synchronizes the device and is
  slow: it is a debugging aid (compare a CUDA result with the reference CPU
  backend without changing the model code), not a production path.
- ``cuda``: require the CUDA backend; CPU tensors are an error.

The variable is read at every call, so it can be changed between calls.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import torch

from vsa import _C
from vsa._args import BACKENDS, invalid_argument, requested_backend  # noqa: F401 (vsa.dispatch's API)


def select_backend(device: torch.device) -> str:
    """The backend ('cpu' or 'cuda') that runs kernels on tensors of `device`.

    Other device types are passed through: the core then reports them as
    unsupported.
    """
    choice = requested_backend()
    if choice == "auto":
        return device.type
    if choice == "cuda" and device.type != "cuda":
        raise invalid_argument("VSA_BACKEND", "tensors on a CUDA device for 'cuda'", device)
    return choice


def _stream(device: torch.device) -> int:
    return torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0


def launch(kernel: Callable, inputs: Sequence[Optional[torch.Tensor]],
           outputs: Sequence[Optional[torch.Tensor]], *scalars) -> None:
    """Runs ``kernel(*inputs, *outputs, *scalars, stream)`` (the vsa._C argument order).

    `outputs` are written in place; None entries pass through as None.
    """
    device = inputs[0].device
    backend = select_backend(device)
    if backend == "cpu":
        # The CPU backend's pool follows torch's thread setting (torch.set_num_threads).
        _C.set_cpu_threads(torch.get_num_threads())
    if backend == device.type:
        if device.type == "cuda":
            with torch.cuda.device(device):
                kernel(*inputs, *outputs, *scalars, _stream(device))
        else:
            kernel(*inputs, *outputs, *scalars, 0)
        return
    # The CPU backend on tensors of another device: a synchronizing round trip.
    host_inputs = [None if t is None else t.cpu() for t in inputs]
    host_outputs = [None if t is None else torch.empty_like(t, device="cpu") for t in outputs]
    kernel(*host_inputs, *host_outputs, *scalars, 0)
    for target, result in zip(outputs, host_outputs):
        if target is not None:
            target.copy_(result)
