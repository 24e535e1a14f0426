"""The `vsa` command: a dispatcher over subcommands.

    vsa info             build facts (version, CUDA kernels, archs, backend)
    vsa bench [ARGS...]  the benchmark (vsa.bench.cli; `vsa bench --help`)
"""

from __future__ import annotations

import os
import sys
from typing import Optional, Sequence

USAGE = """usage: vsa <command> [args...]

commands:
  info    print build facts: version, CUDA kernels compiled in, archs, backend
  bench   run the benchmark (see `vsa bench --help`)
"""


def _info(argv: Sequence[str]) -> int:
    if argv:
        print(f"vsa info: takes no arguments, got {' '.join(argv)}", file=sys.stderr)
        return 2
    import vsa
    print(f"vsa {vsa.__version__} ({vsa.__distribution__}, {vsa.__path__[0]})")
    print(f"cuda kernels: {'yes' if vsa.cuda_compiled() else 'no'}")
    print(f"cuda archs: {vsa.cuda_archs() or '-'}")
    for line in _cuda_device_lines():
        print(line)
    from vsa._args import requested_backend  # not vsa.dispatch: the facts need no torch
    try:
        print(f"VSA_BACKEND: {requested_backend()}")
    except ValueError as e:  # the setting this command is run to check: named, not a traceback
        print(f"VSA_BACKEND: {e}")
        return 1
    return 0


def _cuda_device_lines() -> list[str]:
    """One line per visible CUDA device: its name and the forward kernel vsa runs there."""
    import vsa
    try:
        import torch
    except ModuleNotFoundError:
        return []
    if not vsa.cuda_compiled() or not torch.cuda.is_available():
        return []
    from vsa.support import cuda_forward_kernel_or_reason
    return [f"cuda:{i} {torch.cuda.get_device_name(i)}: forward kernel "
            f"{cuda_forward_kernel_or_reason(i)}" for i in range(torch.cuda.device_count())]


def _bench(argv: Sequence[str]) -> int:
    from vsa.bench.cli import main as bench_main
    return bench_main(list(argv))


COMMANDS = {"info": _info, "bench": _bench}


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, end="", file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    command = COMMANDS.get(argv[0])
    if command is None:
        print(f"vsa: unknown command '{argv[0]}'\n{USAGE}", end="", file=sys.stderr)
        return 2
    try:
        return command(argv[1:]) or 0
    except BrokenPipeError:
        # The reader went away (`vsa bench --list | head`): stop quietly, as Unix
        # tools do; stdout is pointed at /dev/null so the exit flush cannot fail.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
