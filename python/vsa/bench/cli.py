"""`vsa bench`: how much faster is block-sparse attention than what you use now, on this GPU, for
this video shape, and is it correct?"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
from dataclasses import replace

import torch

from . import cases as cases_mod
from .cases import BLOCK_SIZES, CASES, HEAD_DIMS, Case
from .environment import environment
from .inputs import SELECTIONS, block_metadata, random_qkv, select_blocks
from .peers import DENSE_PEERS, SPARSE_PEERS, Problem, Unavailable
from .reference import reference_blocks, relative_error, sample_query_blocks
from .report import Result, attach_speedups, table, write_all
from .timing import median_ms, rotation_count

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
# DESIGN.md §4: relative Frobenius error allowed against the float64 reference.
TOLERANCE = {"bf16": 1e-2, "fp16": 1e-2, "fp32": 1e-5}
# Per-device defaults for flags left unset: (iters, warmup, dtype).
DEFAULTS = {"cuda": (100, 10, "bf16"), "cpu": (3, 1, "fp32")}
BACKWARD_FLOP_FACTOR = 2.5  # FastVideo's convention: backward = 2.5x the forward count


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


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _reason(e: BaseException) -> str:
    if isinstance(e, Unavailable):
        return str(e)
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first[:160]}"


def _backward_calls(forward, input_sets):
    """One retained graph per input set, so timing replays only the backward."""
    calls = []
    for inputs in input_sets:
        leaves = [t.detach().requires_grad_() for t in inputs]
        out = forward(*leaves)
        calls.append(functools.partial(torch.autograd.grad, out, leaves, torch.randn_like(out),
                                       retain_graph=True))
    return calls


def _measure(result: Result, make, problem: Problem, input_sets, flops: float, check,
             args, device: torch.device) -> Result:
    """Fill result's times, TFLOP/s and error; a peer that cannot run leaves n/a and a note."""
    timing = dict(warmup=args.warmup, iters=args.iters, device=device)
    try:
        forward = make(problem)
        with torch.no_grad():
            out = forward(*input_sets[0])  # first call: also compiles where a peer compiles
            result.rel_error = check(out) if check else None
            del out
            result.fwd_ms = median_ms([functools.partial(forward, *s) for s in input_sets],
                                      **timing)
        result.fwd_tflops = flops / result.fwd_ms * 1e-9
    except Exception as e:  # a peer that fails is reported, never fatal
        result.note = _reason(e)
        return result
    if not args.no_backward:
        try:
            result.bwd_ms = median_ms(_backward_calls(forward, input_sets), **timing)
            result.bwd_tflops = BACKWARD_FLOP_FACTOR * flops / result.bwd_ms * 1e-9
        except Exception as e:
            result.note = "backward: " + _reason(e)
    return result


def _progress(r: Result) -> None:
    if r.fwd_ms is None:
        _log(f"  {r.backend}: n/a ({r.note})")
        return
    line = f"  {r.backend}: fwd {r.fwd_ms:.3f} ms ({r.fwd_tflops:.4g} TFLOP/s)"
    if r.bwd_ms is not None:
        line += f", bwd {r.bwd_ms:.3f} ms ({r.bwd_tflops:.4g} TFLOP/s)"
    if r.rel_error is not None:
        line += f", rel err {r.rel_error:.2e}"
    if r.note:
        line += f"  [{r.note}]"
    _log(line)


def run_case(case: Case, keeps: list[float] | None, args, device: torch.device) -> list[Result]:
    dtype = DTYPES[args.dtype]
    # Each case gets compiled peers (FlexAttention) a fresh recompile budget: shapes differ
    # from case to case, and past the limit torch.compile would silently fall back to eager.
    torch.compiler.reset()
    generator = torch.Generator(device).manual_seed(args.seed)
    blocks = block_metadata(case, device)
    vbs = blocks.variable_block_sizes
    if vbs.numel() != case.num_blocks or int(vbs.sum()) != case.valid_tokens:
        raise RuntimeError(f"{case.name}: library metadata ({vbs.numel()} blocks, "
                           f"{int(vbs.sum())} tokens) disagrees with the latent shape "
                           f"({case.num_blocks} blocks, {case.valid_tokens} tokens)")
    set_bytes = 4 * case.batch * case.heads * case.seq_len * case.head_dim * dtype.itemsize
    input_sets = [random_qkv(case, dtype, device, generator)
                  for _ in range(rotation_count(set_bytes, device))]
    # Dense attention in the model runs over the real tokens only, not the block padding.
    dense_sets = input_sets if not case.partial_blocks else [
        tuple(t[:, :, blocks.non_pad_index] for t in s) for s in input_sets]
    row = functools.partial(Result, case=case.name, batch=case.batch, heads=case.heads,
                            head_dim=case.head_dim, block_size=case.block_size,
                            num_blocks=case.num_blocks, seq_len=case.seq_len,
                            valid_tokens=case.valid_tokens, dtype=args.dtype)
    _log(f"[{case.name}] {case.num_blocks} blocks of {case.block_size}, S={case.seq_len} "
         f"({case.valid_tokens} real), {len(input_sets)} input set(s)")

    sparse, dense = [], []
    topks = [case.topk] if keeps is None else [cases_mod.topk_for_keep(k, case.num_blocks)
                                               for k in keeps]
    for topk in dict.fromkeys(topks):
        q2k_idx, q2k_num = select_blocks(case, topk, args.selection, device, generator)
        problem = Problem(input_sets[0], case.block_size, q2k_idx, q2k_num, vbs)
        samples = sample_query_blocks(case.batch, case.heads, case.num_blocks, args.check_blocks,
                                      torch.Generator().manual_seed(args.seed))
        reference = reference_blocks(*input_sets[0], q2k_idx, q2k_num, vbs, samples) \
            if samples else None
        check = functools.partial(relative_error, reference=reference, samples=samples) \
            if samples else None
        _log(f"[{case.name}] topk {topk} ({topk / case.num_blocks:.1%} kept)")
        for name in (n for n in SPARSE_PEERS if n in args.backends):
            result = _measure(row(backend=name, sparse=True, topk=topk,
                                  keep=topk / case.num_blocks),
                              SPARSE_PEERS[name], problem, input_sets,
                              case.sparse_flops(topk), check, args, device)
            _progress(result)
            sparse.append(result)
        del problem, reference, q2k_idx, q2k_num

    # Dense does not depend on the selection: measured once per case.
    dense_problem = Problem(dense_sets[0], case.block_size)
    for name in (n for n in DENSE_PEERS[device.type] if n in args.backends):
        result = _measure(row(backend=name, sparse=False, topk=case.num_blocks, keep=1.0),
                          DENSE_PEERS[device.type][name], dense_problem, dense_sets,
                          case.dense_flops(), None, args, device)
        _progress(result)
        dense.append(result)
    return sparse + dense


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

    results: list[Result] = []
    for case in args.cases:
        results += run_case(case, args.sparsity, args, device)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    attach_speedups(results)
    print(table(results))

    failed = [r for r in results if r.backend == "vsa" and r.rel_error is not None
              and r.rel_error > TOLERANCE[args.dtype]]
    for r in failed:
        print(f"FAIL {r.case} topk {r.topk}: vsa rel err {r.rel_error:.2e} > "
              f"{TOLERANCE[args.dtype]:.0e}")
    if args.out:
        settings = {k: v for k, v in vars(args).items() if k != "cases"}
        settings["cases"] = [dataclasses.asdict(c) for c in args.cases]
        for line in write_all(args.out, env, settings, results):
            print(line)
    return 1 if failed else 0
