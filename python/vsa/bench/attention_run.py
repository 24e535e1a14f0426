"""`vsa bench --op attention`: one case, every sparse peer on each selection, then dense attention,
forward and backward."""

from __future__ import annotations

import functools

import torch

from .cases import Case
from .inputs import case_inputs, select_blocks
from .measure import add_note, backward_calls, checked_dq, log, progress, reason, timed_forward
from .peers import DENSE_PEERS, SPARSE_PEERS, vsa_query_rows
from .problem import Problem
from .reference import reference_blocks, reference_dq_blocks, relative_error, sample_query_blocks
from .report import Result
from .timing import median_ms

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
BACKWARD_FLOP_FACTOR = 2.5  # FastVideo's convention: backward = 2.5x the forward count


def _measure(result: Result, make, problem: Problem, input_sets, flops: float, check,
             args, device: torch.device, dq_check=None) -> Result:
    """Fill result's times, TFLOP/s and errors; a peer that cannot run leaves n/a and a note.
    dq_check: (dout, check of dq) for the backward's first input set, or None."""
    timing = dict(warmup=args.warmup, iters=args.iters, device=device)
    runner = timed_forward(result, make, problem, input_sets, check, timing)
    if runner is None:
        return result
    result.fwd_tflops = flops / result.fwd_ms * 1e-9
    if not args.no_backward:
        try:
            if dq_check is not None:
                result.bwd_rel_error = checked_dq(runner, input_sets[0], *dq_check)
            result.bwd_ms = median_ms(backward_calls(runner, input_sets), **timing)
            result.bwd_tflops = BACKWARD_FLOP_FACTOR * flops / result.bwd_ms * 1e-9
        except Exception as e:
            add_note(result, "backward: " + reason(e))
    return result


# The note on vsa's rows when it computes real query rows only.
REAL_ROWS_NOTE = "real query rows only (q_variable_block_sizes)"


def run_case(case: Case, keeps: list[float] | None, args, device: torch.device) -> list[Result]:
    blocks, input_sets, generator = case_inputs(case, DTYPES[args.dtype], device, args.seed)
    vbs = blocks.variable_block_sizes
    # Dense attention in the model runs over the real tokens only, not the block padding.
    dense_sets = input_sets if not case.partial_blocks else [
        tuple(t[:, :, blocks.non_pad_index] for t in s) for s in input_sets]
    row = functools.partial(Result, **case.result_fields(args.dtype))
    log(f"[{case.name}] {case.num_blocks} blocks of {case.block_size}, S={case.seq_len} "
        f"({case.valid_tokens} real), {len(input_sets)} input set(s)")

    sparse, dense = [], []
    for topk in case.topks(keeps):
        q2k_idx, q2k_num = select_blocks(case, topk, args.selection, device, generator)
        problem = Problem(input_sets[0], case.block_size, q2k_idx, q2k_num, vbs,
                          vbs if case.partial_blocks else None)
        # Which of vsa's rows were told the real query rows (peers.vsa_query_rows).
        told_rows = {"vsa": vsa_query_rows(problem) is not None,
                     "vsa-rows": problem.real_query_rows is not None}
        samples = sample_query_blocks(case.batch, case.heads, case.num_blocks, args.check_blocks,
                                      torch.Generator().manual_seed(args.seed))
        reference = reference_blocks(*input_sets[0], q2k_idx, q2k_num, vbs, samples) \
            if samples else None
        # Every peer is checked on the real rows: the model drops the padding rows' output.
        check = functools.partial(relative_error, reference=reference, samples=samples, real_rows=vbs) \
            if samples else None
        # The backward's dq on the same rows, for one fixed output gradient.
        dout = torch.randn(input_sets[0][0].shape, generator=torch.Generator(device).manual_seed(args.seed + 1),
                           device=device, dtype=input_sets[0][0].dtype)
        dq_check = (dout, functools.partial(
            relative_error, samples=samples, real_rows=vbs,
            reference=reference_dq_blocks(*input_sets[0], q2k_idx, q2k_num, vbs, samples, dout))) \
            if samples else None
        log(f"[{case.name}] topk {topk} ({topk / case.num_blocks:.1%} kept)")
        for name in (n for n in SPARSE_PEERS if n in args.backends):
            result = _measure(row(backend=name, sparse=True, topk=topk,
                                  keep=topk / case.num_blocks),
                              SPARSE_PEERS[name], problem, input_sets,
                              case.sparse_flops(topk), check, args, device, dq_check)
            if told_rows.get(name, False) and result.fwd_ms is not None:
                add_note(result, REAL_ROWS_NOTE)
            progress(result)
            sparse.append(result)
        del problem, reference, dq_check, q2k_idx, q2k_num

    # Dense does not depend on the selection: measured once per case.
    dense_problem = Problem(dense_sets[0], case.block_size)
    for name in (n for n in DENSE_PEERS[device.type] if n in args.backends):
        result = _measure(row(backend=name, sparse=False, topk=case.num_blocks, keep=1.0),
                          DENSE_PEERS[device.type][name], dense_problem, dense_sets,
                          case.dense_flops(), None, args, device)
        progress(result)
        dense.append(result)
    return sparse + dense
