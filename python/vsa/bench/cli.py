"""`vsa bench`: how much faster is block-sparse attention (--op attention) or the whole VSA layer
(--op layer) than what you use now, on this GPU, for this video shape, and is it correct?"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import replace

import torch

from . import cases as cases_mod
from .attention_run import DTYPES, run_case
from .cases import BLOCK_SIZES, CASES, HEAD_DIMS, Case
from .cpu_facts import gemm_share_lines
from .environment import environment
from .inputs import SELECTIONS
from .layer_peers import FINE_KERNEL, LAYER_PEERS
from .layer_report import attach_layer_ratios, layer_table
from .layer_run import run_layer_case
from .peers import DENSE_PEERS, SPARSE_PEERS
from .report import attach_fastvideo_ratios, attach_speedups, table, write_all

OPS = ("attention", "layer")
# Relative Frobenius error allowed against the float64 reference (the tests' bound).
TOLERANCE = {"bf16": 1e-2, "fp16": 1e-2, "fp32": 1e-5}
# Per-device defaults for flags left unset: (iters, warmup, dtype).
DEFAULTS = {"cuda": (100, 10, "bf16"), "cpu": (3, 1, "fp32")}
# Default cases per (op, device).
DEFAULT_CASES = {("attention", "cuda"): cases_mod.DEFAULT_GPU_CASES,
                 ("attention", "cpu"): cases_mod.DEFAULT_CPU_CASES,
                 ("layer", "cuda"): cases_mod.DEFAULT_GPU_LAYER_CASES,
                 ("layer", "cpu"): cases_mod.DEFAULT_CPU_LAYER_CASES}


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
        description="Benchmark block-sparse attention (or the whole VSA layer, --op layer) "
                    "against dense SDPA, FlexAttention and FastVideo's kernels, forward and "
                    "backward, with a float64 correctness check.")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument("--op", choices=OPS, default="attention",
                   help="attention: the block-sparse kernels, forward and backward (default); "
                        "layer: the whole VSA layer (coarse + selection + fine), forward and "
                        "forward+backward, with vsa's fine kernel alone and its stage split")
    p.add_argument("--case", action="append", metavar="NAME[,NAME]",
                   help="case(s) to run, repeatable; 'all' for every case (default: Wan 480p and "
                        "the anchor rows on GPU, the scaled-down cpu-* cases on CPU; with --op "
                        "layer, Wan 480p on GPU and cpu-wan-crop on CPU)")
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
    p.add_argument("--selection", choices=SELECTIONS,
                   help="--op attention: random top-k per row (default), or the nearest blocks "
                        "in tile order (the layer selects its own)")
    p.add_argument("--backends", metavar="NAME[,NAME]",
                   help="only these backends (default: all): "
                        + ", ".join([*SPARSE_PEERS, *DENSE_PEERS["cuda"], *DENSE_PEERS["cpu"]])
                        + "; with --op layer: " + ", ".join(LAYER_PEERS))
    p.add_argument("--iters", type=_int_at_least(1), help="timed runs (default 100 GPU, 3 CPU)")
    p.add_argument("--warmup", type=_int_at_least(0), help="untimed runs (default 10 GPU, 1 CPU)")
    p.add_argument("--no-backward", action="store_true",
                   help="time the forward only (no backward, no layer forward+backward)")
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

    if args.op == "layer" and args.selection:
        p.error("argument --selection: --op layer selects its own blocks (top-k of the coarse "
                "scores); --selection is for --op attention")
    args.selection = args.selection or "random"
    known = [*SPARSE_PEERS, *DENSE_PEERS[args.device]] if args.op == "attention" else \
        list(LAYER_PEERS)
    if args.backends:
        args.backends = args.backends.split(",")
        unknown = [b for b in args.backends if b not in known]
        if unknown:
            p.error(f"argument --backends: unknown for --op {args.op} on {args.device}: "
                    f"{', '.join(unknown)} (choose from {', '.join(known)})")
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
        chosen = [CASES[n] for n in DEFAULT_CASES[args.op, args.device]]
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
        print(f"CPU run on {env['cpu_model']} ({env['cpu_threads']} threads, SIMD "
              f"{env['cpu_simd']}, {env['cpu_math_library']}; fp32 GEMM rate "
              f"{env['cpu_fp32_gemm_gflops']} GFLOP/s by {env['cpu_fp32_gemm_by']}): the CPU backend "
              "on scaled-down cases; GPU peers are n/a. On cases with partial blocks vsa is given the "
              "real query rows (q_variable_block_sizes, as the VSA layer passes them) and computes "
              "only those, like dense attention over the real tokens; every peer is checked on the "
              "real rows.")
    else:
        print(f"GPU run on {env['gpu']} ({env['gpu_capability']}), torch {env['torch']}, "
              f"--op {args.op}")

    run = run_case if args.op == "attention" else run_layer_case
    results = []
    for case in args.cases:
        results += run(case, args.sparsity, args, device)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    failed = _verdict(results, args)
    if device.type == "cpu" and args.op == "attention":
        print("\n".join(gemm_share_lines(results, env["cpu_fp32_gemm_gflops"])))
    if args.out:
        settings = {k: v for k, v in vars(args).items() if k != "cases"}
        settings["cases"] = [dataclasses.asdict(c) for c in args.cases]
        for line in write_all(args.out, env, settings, results):
            print(line)
    return 1 if failed else 0


def _verdict(results: list, args: argparse.Namespace) -> bool:
    """Prints the table and what fails the run: any of vsa's attention kernels (or, for the layer,
    its fine kernel alone on the reference selection) beyond the tolerance, in the forward's output
    or the backward's dq, and vsa itself not running, forward or backward. vsa's whole layer only
    warns: its selection may differ from the float64 layer's at near-ties, which moves a sampled
    block."""
    tolerance = TOLERANCE[args.dtype]
    if args.op == "attention":
        attach_speedups(results)
        attach_fastvideo_ratios(results)
        print(table(results))
        strict, must_run, lenient = ("vsa", "vsa-portable", "vsa-rows"), "vsa", None
    else:
        attach_layer_ratios(results)
        print(layer_table(results))
        strict, must_run, lenient = (FINE_KERNEL,), FINE_KERNEL, "vsa"
    failed = False
    for r in results:
        if r.backend == must_run and (r.fwd_ms is None or "backward:" in r.note):
            failed = True
            print(f"FAIL {r.case} topk {r.topk}: {r.backend} did not run ({r.note})")
        errors = [("rel err", r.rel_error), ("dq rel err", getattr(r, "bwd_rel_error", None))]
        for what, error in errors:
            if error is None or error <= tolerance:
                continue
            if r.backend in strict:
                failed = True
                print(f"FAIL {r.case} topk {r.topk}: {r.backend} {what} {error:.2e} > {tolerance:.0e}")
        if r.rel_error is None or r.rel_error <= tolerance:
            continue
        if r.backend == lenient:
            print(f"WARN {r.case} topk {r.topk}: vsa layer rel err {r.rel_error:.2e} > "
                  f"{tolerance:.0e} against the float64 layer (a selection differing at a "
                  f"near-tie, or a bug: run tests/python/test_layer.py)")
    return failed
