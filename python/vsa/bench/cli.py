"""`vsa bench`: how much faster is block-sparse attention than what you use now, on this GPU, for
this video shape, and is it correct?"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import replace

import torch

from . import cases as cases_mod
from .attention_run import DTYPES, run_case
from .cases import BLOCK_SIZES, CASES, HEAD_DIMS, Case
from .environment import environment
from .inputs import SELECTIONS
from .peers import DENSE_PEERS, SPARSE_PEERS
from .report import attach_fastvideo_ratios, attach_speedups, table, write_all

# DESIGN.md §4: relative Frobenius error allowed against the float64 reference.
TOLERANCE = {"bf16": 1e-2, "fp16": 1e-2, "fp32": 1e-5}
# Per-device defaults for flags left unset: (iters, warmup, dtype).
DEFAULTS = {"cuda": (100, 10, "bf16"), "cpu": (3, 1, "fp32")}


def _int_at_least(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    return parse


def _keep_fractions(text: str) -> list[float]:
    values = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected fractions like 0.1,0.25, got {part!r}") \
                from None
        if not 0.0 < value <= 1.0:
            raise argparse.ArgumentTypeError(
                f"a fraction of KV blocks kept must lie in (0, 1], got {value}")
        values.append(value)
    return values


def _latent(text: str) -> tuple[int, int, int]:
    parts = text.replace(",", "x").split("x")
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        shape = ()
    if len(shape) != 3 or min(shape) < 1:
        raise argparse.ArgumentTypeError(f"expected T x H x W like 21x30x52, got {text!r}")
    return shape


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vsa bench",
        description="Benchmark block-sparse attention against dense SDPA, FlexAttention and "
                    "FastVideo's kernels, with a float64 correctness check.")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument("--case", action="append", metavar="NAME[,NAME]",
                   help="case(s) to run, repeatable; 'all' for every case (default: the DESIGN "
                        "§5 anchor rows on GPU, the scaled-down cpu-* cases on CPU)")
    p.add_argument("--latent", type=_latent, metavar="TxHxW",
                   help="also run your own latent shape (after patching), e.g. 21x30x52")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--dtype", choices=tuple(DTYPES), help="default bf16 on GPU, fp32 on CPU")
    p.add_argument("--batch", type=_int_at_least(1), help="override the cases' batch")
    p.add_argument("--heads", type=_int_at_least(1), help="override the cases' head count")
    p.add_argument("--head-dim", type=int, choices=HEAD_DIMS, help="override the head dim")
    p.add_argument("--block-size", type=int, choices=BLOCK_SIZES,
                   help="tokens per sparse block (the fraction of blocks kept is preserved)")
    keep = p.add_mutually_exclusive_group()
    keep.add_argument("--topk", type=_int_at_least(1), help="KV blocks per query block")
    keep.add_argument("--sparsity", type=_keep_fractions, metavar="KEEP[,KEEP]",
                      help="fraction(s) of KV blocks each query block keeps, in (0, 1]; several "
                           "make a sweep, plotted with --out")
    p.add_argument("--selection", choices=SELECTIONS, default="random",
                   help="random top-k per row, or the nearest blocks in tile order")
    p.add_argument("--backends", metavar="NAME[,NAME]",
                   help="only these backends (default: all): "
                        + ", ".join([*SPARSE_PEERS, *DENSE_PEERS["cuda"], *DENSE_PEERS["cpu"]]))
    p.add_argument("--iters", type=_int_at_least(1), help="timed runs (default 100 GPU, 3 CPU)")
    p.add_argument("--warmup", type=_int_at_least(0), help="untimed runs (default 10 GPU, 1 CPU)")
    p.add_argument("--no-backward", action="store_true", help="time the forward only")
    p.add_argument("--check-blocks", type=_int_at_least(0), default=16,
                   help="query blocks checked against float64 per backend (0: no check)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", metavar="DIR", help="write results.json, results.csv, results.png")
    return p


def _resolve(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Fill per-device defaults and turn names into cases; impossible flags end in p.error."""
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    elif args.device == "cuda" and not torch.cuda.is_available():
        p.error("argument --device: cuda requested but torch sees no GPU")
    iters, warmup, dtype = DEFAULTS[args.device]
    args.iters = args.iters if args.iters is not None else iters
    args.warmup = args.warmup if args.warmup is not None else warmup
    args.dtype = args.dtype or dtype
    if args.dtype == "fp32" and args.device == "cuda":
        p.error("argument --dtype: fp32 runs on the CPU backend only; use bf16 or fp16 on GPU")

    known = [*SPARSE_PEERS, *DENSE_PEERS[args.device]]
    if args.backends:
        args.backends = args.backends.split(",")
        unknown = [b for b in args.backends if b not in known]
        if unknown:
            p.error(f"argument --backends: unknown on {args.device}: {', '.join(unknown)} "
                    f"(choose from {', '.join(known)})")
    else:
        args.backends = known

    names = [n for arg in args.case or [] for n in arg.split(",") if n]
    if "all" in names:
        names = list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        p.error(f"argument --case: unknown case {', '.join(map(repr, unknown))} (see --list)")
    chosen = [CASES[n] for n in dict.fromkeys(names)]
    if args.latent:
        chosen.append(cases_mod.latent_case(args.latent))
    elif not chosen:
        default = cases_mod.DEFAULT_GPU_CASES if args.device == "cuda" else \
            cases_mod.DEFAULT_CPU_CASES
        chosen = [CASES[n] for n in default]
    args.cases = [_override(p, c, args) for c in chosen]


def _override(p: argparse.ArgumentParser, case: Case, args: argparse.Namespace) -> Case:
    if args.block_size:
        case = case.with_block_size(args.block_size)
    case = replace(case, batch=args.batch or case.batch, heads=args.heads or case.heads,
                   head_dim=args.head_dim or case.head_dim)
    if args.topk is not None:
        if args.topk > case.num_blocks:
            p.error(f"argument --topk: {args.topk} is more than the {case.num_blocks} blocks of "
                    f"case {case.name}")
        case = replace(case, topk=args.topk)
    return case


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.list:
            for case in CASES.values():
                print(cases_mod.describe(case))
            return 0
        _resolve(parser, args)
    except SystemExit as e:  # argparse exits on --help (0) and on bad flags (2)
        return int(e.code or 0)
    device = torch.device(args.device)
    if device.type == "cuda":
        device = torch.device("cuda", torch.cuda.current_device())
    env = environment(device)
    if device.type == "cpu":
        print(f"CPU run ({env['cpu_threads']} threads): the CPU backend on scaled-down cases, "
              "for correctness and a rough idea only; GPU peers are n/a.")
    else:
        print(f"GPU run on {env['gpu']} ({env['gpu_capability']}), torch {env['torch']}")

    results = []
    for case in args.cases:
        results += run_case(case, args.sparsity, args, device)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    failed = _verdict(results, args)
    if args.out:
        settings = {k: v for k, v in vars(args).items() if k != "cases"}
        settings["cases"] = [dataclasses.asdict(c) for c in args.cases]
        for line in write_all(args.out, env, settings, results):
            print(line)
    return 1 if failed else 0


def _verdict(results: list, args: argparse.Namespace) -> bool:
    """Prints the table; vsa beyond the tolerance against float64 fails the run."""
    attach_speedups(results)
    attach_fastvideo_ratios(results)
    print(table(results))
    failed = [r for r in results if r.backend == "vsa" and r.rel_error is not None
              and r.rel_error > TOLERANCE[args.dtype]]
    for r in failed:
        print(f"FAIL {r.case} topk {r.topk}: vsa rel err {r.rel_error:.2e} > "
              f"{TOLERANCE[args.dtype]:.0e}")
    return bool(failed)
