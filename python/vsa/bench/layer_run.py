"""`vsa bench --op layer`: every backend's VSA layer on one case, forward and forward + backward,
checked against the float64 layer on sampled query blocks; vsa's forward split by stage."""

from __future__ import annotations

import functools

import torch

from .attention_run import DTYPES
from .cases import Case
from .inputs import case_inputs, zero_pad_tokens
from .layer_peers import FINE_KERNEL, LAYER_PEERS
from .layer_reference import reference_layer, reference_layer_blocks
from .layer_report import LayerResult
from .measure import add_note, forward_calls, log, progress, reason, timed_forward, training_calls
from .problem import LayerProblem, Runner
from .reference import reference_blocks, relative_error, sample_query_blocks
from .stages import profile_stages
from .timing import alternating_medians_ms, median_ms

PROFILED = "vsa"  # the backend whose forward is split by stage


def _measure(result: LayerResult, make, problem: LayerProblem, input_sets, check, args,
             device: torch.device) -> Runner | None:
    """Fill result's times and error; a peer that cannot run leaves n/a and a note, a later step
    that fails leaves what was measured and says which step failed. The runner, None when the
    peer cannot run."""
    timing = dict(warmup=args.warmup, iters=args.iters, device=device)
    runner = timed_forward(result, make, problem, input_sets, check, timing)
    if runner is None:
        return None
    if not args.no_backward:
        try:
            result.fwdbwd_ms = median_ms(training_calls(runner, input_sets), **timing)
        except Exception as e:
            add_note(result, "backward: " + reason(e))
    return runner


def _profile_stages(result: LayerResult, runner: Runner, input_sets, device: torch.device) -> None:
    """vsa's forward split by stage, after every timing of the case, so that none follows the
    profiler: on the H200 the layer timed alternately after it came out at 1.105-1.133x the
    fine kernel, and at 1.087x in a run with no profiler (bench/results/2026-12-02-h200-*)."""
    try:
        with torch.no_grad():
            stages = profile_stages(functools.partial(runner, *input_sets[0]), device)
        result.stage_ms, result.stage_total_ms = stages.ms, stages.total_ms
        result.stage_source, result.stage_kernels = stages.source, stages.kernels
    except Exception as e:
        add_note(result, "stages: " + reason(e))


def _time_layer_against_fine(ours: LayerResult, layer: Runner, fine: Runner, input_sets, args,
                             device: torch.device) -> None:
    """The layer's forward over the fine kernel's, the two timed alternately (the goal's ratio,
    without the drift between two measurements taken one after the other)."""
    try:
        with torch.no_grad():
            layer_ms, fine_ms = alternating_medians_ms(
                [forward_calls(layer, input_sets), forward_calls(fine, input_sets)],
                warmup=args.warmup, iters=args.iters, device=device)
        ours.fwd_per_fine_alternating = layer_ms / fine_ms
    except Exception as e:
        add_note(ours, "alternating: " + reason(e))


def run_layer_case(case: Case, keeps: list[float] | None, args,
                   device: torch.device) -> list[LayerResult]:
    blocks, input_sets, _ = case_inputs(case, DTYPES[args.dtype], device, args.seed)
    input_sets = [zero_pad_tokens(s, blocks.non_pad_index) for s in input_sets]
    vbs = blocks.variable_block_sizes
    row = functools.partial(LayerResult, **case.result_fields(args.dtype))
    log(f"[{case.name} layer] {case.num_blocks} blocks of {case.block_size}, S={case.seq_len} "
        f"({case.valid_tokens} real), {len(input_sets)} input set(s)")

    results = []
    for topk in case.topks(keeps):
        ref = reference_layer(*input_sets[0], vbs, case.block_size, topk)
        problem = LayerProblem(input_sets[0], case.block_size, vbs, topk, ref.q2k_idx,
                               ref.q2k_num)
        samples = sample_query_blocks(case.batch, case.heads, case.num_blocks, args.check_blocks,
                                      torch.Generator().manual_seed(args.seed))
        # The layers against the float64 layer; vsa's fine kernel alone against the float64 fine
        # stage on the same (reference) selection.
        expected = {} if not samples else {
            "layer": reference_layer_blocks(*input_sets[0], vbs, ref, samples),
            "fine": reference_blocks(*input_sets[0], ref.q2k_idx, ref.q2k_num, vbs, samples)}
        log(f"[{case.name} layer] topk {topk} ({topk / case.num_blocks:.1%} kept)")
        runners = {}  # vsa's layer and its fine kernel, timed against each other at the end
        for name in (n for n in LAYER_PEERS if n in args.backends):
            # On the real rows: vsa's layer computes no fine attention for a pad token (its
            # output there is the coarse part alone), and the model drops those rows.
            check = functools.partial(
                relative_error, samples=samples, real_rows=vbs,
                reference=expected["fine" if name == FINE_KERNEL else "layer"]) \
                if samples else None
            result = row(backend=name, topk=topk, keep=topk / case.num_blocks)
            runner = _measure(result, LAYER_PEERS[name], problem, input_sets, check, args, device)
            if name in (PROFILED, FINE_KERNEL) and runner is not None:
                runners[name] = (result, runner)
            progress(result)
            results.append(result)
        if PROFILED in runners and FINE_KERNEL in runners:
            (ours, layer), (_, fine) = runners[PROFILED], runners[FINE_KERNEL]
            _time_layer_against_fine(ours, layer, fine, input_sets, args, device)
        if PROFILED in runners:
            _profile_stages(*runners[PROFILED], input_sets, device)
        del ref, problem, expected, runners
    return results
