"""Lesson 1: data parallelism needs an all-reduce, and the ring does it in 2(n-1) steps.

The `ring-allreduce` lesson, top to bottom: its params (.params), its narrative
(with every text a learner reads, in texts.toml), its Program (.program), its
metrics. Each iteration starts with a barrier (so all ranks start together)
and then runs the chosen algorithm on a buffer of `size` bytes per rank:

- ring: the hand-made ring reduce-scatter + all-gather (runtime.engine.collectives),
  one sendrecv Span per step with its bytes, peer and chunk;
- tree: binomial-tree reduce to rank 0, then binomial-tree broadcast;
- builtin: torch.distributed.all_reduce, one Span per rank.

Whatever the algorithm, every iteration ends with a reference: a barrier and
torch's own all_reduce on the same data (series "reference"), timed as Spans of
the same Program, side by side with the hand-made one; the rank code
(scenarios.ring_allreduce.rank) checks that the hand result equals torch's.

The first WARMUP_ITERATIONS iterations are a warm-up, on the timeline in their own
series (runtime.engine.workers.WARMUP_SERIES) and predicted like the others: the metrics
read the timed series only, on the measured and the predicted timeline alike, and the
model refined after a run leaves the warm-up steps out too (Hooks.warmup_steps).

Metrics follow nccl-tests' definitions: algbw = S/t, busbw = algbw·2(n-1)/n.

Imports: runtime's pure part and the lesson contract (the UI imports this).
"""

from __future__ import annotations

import statistics
from dataclasses import replace

from runtime.engine.faults import Fault, require_timed
from runtime.fit.after_run import Refinement
from runtime.sim import collective_kinds, formulas
from runtime.sim.program import Program
from runtime.sim.trace import Timeline
from scenarios.base import Hooks, Lesson, RunData
from scenarios.metrics import Metric
from scenarios.params import ParamError
from scenarios.ring_allreduce import lumped
from scenarios.ring_allreduce.params import (
    REFERENCE,
    WARMUP_ITERATIONS,
    RingParams,
    RingResult,
)
from scenarios.ring_allreduce.program import build
from scenarios.texts import load_texts

# -- parameters: RingParams, and each rank's RingResult (scenarios/ring_allreduce/params.py)

# -- narrative: the steps, title, summary and params' help, in Spanish and English --
TEXTS = load_texts(__package__)  # scenarios/ring_allreduce/texts.toml


# -- program: build (scenarios/ring_allreduce/program.py) ---------------------------------


# -- metrics ------------------------------------------------------------------------------
def metrics(
    params: RingParams, predicted: Timeline, run: RunData[RingResult] | None
) -> list[Metric]:
    n, nbytes = params.ranks, params.size
    hand, reference = params.algorithm, REFERENCE
    predicted_s = statistics.median(iteration_times(predicted, hand))
    builtin_predicted_s = statistics.median(iteration_times(predicted, reference))
    measured_s = builtin_s = None
    if run is not None:
        measured_s = statistics.median(iteration_times(run.measured, hand))
        builtin_s = statistics.median(iteration_times(run.measured, reference))

    def busbw(seconds: float | None) -> float | None:
        return collective_kinds.busbw("all_reduce", n, nbytes, seconds) / 1e9 if seconds else None

    out = [
        Metric("time_s", "s", measured_s, predicted_s),
        Metric("busbw_gbps", "GB/s", busbw(measured_s), busbw(predicted_s)),
        Metric("builtin_time_s", "s", builtin_s, builtin_predicted_s),
        Metric("builtin_busbw_gbps", "GB/s", busbw(builtin_s), busbw(builtin_predicted_s)),
    ]
    # What each rank sends in one iteration (the tree's differs by rank: read off its steps).
    tree = params.stepwise and params.algorithm == "tree"
    expected = expected_bytes(params, build(replace(params, repeat=1)) if tree else None)
    if run is None:
        return [*out, Metric("expected_bytes_per_rank", "bytes", expected)]
    results = run.results
    sent = [r.bytes_sent_per_iteration for r in results]
    ratio = (busbw(measured_s) or 0.0) / (busbw(builtin_s) or 1.0) if builtin_s else None
    return [
        *out,
        Metric(
            "algbw_gbps", "GB/s", formulas.algbw(nbytes, measured_s) / 1e9 if measured_s else None
        ),
        Metric("busbw_vs_builtin", "ratio", ratio),
        Metric(
            "bytes_sent_per_rank",
            "bytes",
            None if any(s is None for s in sent) else sent,
            expected,
            per="rank",
        ),
        Metric("max_abs_diff_vs_builtin", "diff", max(r.max_abs_diff_vs_builtin for r in results)),
        Metric("equals_builtin", "flag", all(r.equals_builtin for r in results)),
    ]


def iteration_times(timeline: Timeline, series: str) -> list[float]:
    """Per iteration: from the first rank starting the series' all-reduce to the last
    one finishing it."""
    bounds: dict[int, list[float]] = {}
    for span in timeline.of_series(series):
        if span.step is None:
            continue
        lo_hi = bounds.setdefault(span.step, [span.start, span.end])
        lo_hi[0] = min(lo_hi[0], span.start)
        lo_hi[1] = max(lo_hi[1], span.end)
    return [hi - lo for _, (lo, hi) in sorted(bounds.items())] or [0.0]


def expected_bytes(params: RingParams, program: Program | None) -> float | list[float]:
    """Ring: the formula 2S(n-1)/n. Tree: what each rank's schedule sends (it differs by rank)."""
    n = params.ranks
    if params.algorithm != "tree" or program is None:
        return formulas.ring_all_reduce_bytes_per_rank(n, params.size)
    per_rank = [0.0] * n
    for action in program.actions():
        if action.step == WARMUP_ITERATIONS:  # the first timed iteration
            for _dst, nbytes in action.sends():
                per_rank[action.rank] += nbytes
    return per_rank


RANK_ENTRY = (
    "scenarios.ring_allreduce.rank:run_rank"  # what each rank runs (torch: never imported here)
)


# At thousands of ranks and many iterations `predict` lumps (scenarios.ring_allreduce.lumped).
# After a run its steps are costed one by one (runtime.fit.refine_collectives) and the
# executor's Python between two of them is added (Refinement's measured gaps).
def check_faults(params: RingParams, faults: list[Fault]) -> None:
    """Timed faults, and a slow rank where it has something to slow: its own reductions
    (each ring or tree step's add, runtime.engine.worker). Inside torch's all_reduce (builtin,
    or any algorithm costed as one action) the reduction is gloo's, which no rank code
    can slow, so the fault would have no effect: refused, not silently ignored."""
    require_timed(faults)
    slow = next((f for f in faults if f.kind == "slow"), None)
    if slow is not None and not params.stepwise:
        spec = slow.describe()
        raise ParamError(
            "algorithm",
            f"--fault {spec!r}: with algorithm={params.algorithm} the reduction runs inside "
            "torch's all_reduce, which a slow rank cannot slow; use algorithm=ring or tree",
            es=f"--fault {spec!r}: con algorithm={params.algorithm} la reducción ocurre dentro "
            "del all_reduce de torch, que un rango lento no puede ralentizar; use "
            "algorithm=ring o tree",
        )


HOOKS = Hooks(
    lump=lumped.lump,
    headline=("time_s",),
    refinement=Refinement(gaps="measured"),
    check_faults=check_faults,
    warmup_steps=lambda _params: WARMUP_ITERATIONS,
    faults_of=lambda params: params.faults.specs(),  # the form's (scenarios.fault_knobs)
)
LESSON = Lesson(
    "ring-allreduce", 1, TEXTS, RingParams, RingResult, build, metrics, RANK_ENTRY, HOOKS
)
