"""Lesson 1 at scale: `predict` with thousands of ranks and many iterations, lumped.

The lesson's `lump` hook (scenarios.base.Lumped). Every iteration starts with a
barrier and ends with torch's all-reduce over all ranks, so each one starts
with every rank in step and takes the same time: the warm-up iterations and the
first timed one are simulated, and timed iterations 2..R are the same, shifted (one
bar per rank stands for them). When
the Program costs each rank's all-reduce by its formula (above
STEPWISE_MAX_RANKS ranks, or `builtin`), the ranks are also all alike, so rank 0
stands for every one of them (runtime.sim.simulate.simulate_lockstep). The metrics
read the same numbers off this timeline as off the full one; the lesson's tests
check that they agree where both run.

Imports: runtime's pure part, the lesson contract and the lesson's params and Program
(the UI imports this).
"""

from __future__ import annotations

from dataclasses import replace

from runtime.sim import formulas
from runtime.sim.costmodel import CostModel
from runtime.sim.simulate import simulate, simulate_lockstep
from runtime.sim.trace import Span, Timeline
from scenarios.base import LUMP_ABOVE_ACTIONS, Lumped
from scenarios.ring_allreduce.params import WARMUP_ITERATIONS, RingParams
from scenarios.ring_allreduce.program import build


def lump(params: RingParams, model: CostModel) -> Lumped | None:
    """The lumped prediction when the Program has more than LUMP_ABOVE_ACTIONS Actions
    (None: small enough to simulate them all)."""
    n = params.ranks
    # Per rank and iteration: two barriers, the reference all-reduce, and the hand-made
    # steps (2(n-1) ring steps, at most 2·log2(n) tree rounds), or its one all-reduce.
    steps = 2 * (n - 1) if params.algorithm == "ring" else 2 * formulas.tree_rounds(n)
    per_iteration = n * (3 + (steps if params.stepwise else 1))
    if per_iteration * (WARMUP_ITERATIONS + params.repeat) <= LUMP_ABOVE_ACTIONS:
        return None
    return lumped(params, model)


def lumped(params: RingParams, model: CostModel) -> Lumped:
    """The warm-up and timed iteration 1 (of rank 0 alone when the ranks are alike),
    then one bar per rank for the identical iterations after them."""
    n, repeat = params.ranks, params.repeat
    first = build(replace(params, repeat=1))  # the warm-up iterations, then one timed
    if params.stepwise:  # the hand-made steps differ by rank (the tree): simulate them all
        spans = simulate(first, model).spans
        how = f"iteration 1 simulated step by step on all {n} ranks"
    else:  # one all-reduce per rank, the same on every rank: rank 0 stands for all
        spans = simulate_lockstep(first.ranks[0], model, n)
        how = (
            f"the {n:,} ranks are alike (a barrier, then each all-reduce by its α-β formula), "
            "so rank 0 stands for all of them"
        )
    simulated = WARMUP_ITERATIONS + 1
    end = max(s.end for s in spans)
    period = end / simulated
    if repeat > 1:
        rest = f"iterations 2–{repeat} (×{repeat - 1}, each as iteration 1)"
        shown = sorted({s.rank for s in spans})
        spans = [
            *spans,
            *(Span(r, "lumped", rest, end, end + (repeat - 1) * period) for r in shown),
        ]
    formula = (
        f"{how}; every iteration starts with a barrier and ends with an all-reduce over all "
        f"ranks, so each takes the same T = {period:.6g} s and the {WARMUP_ITERATIONS} "
        f"warm-up and {repeat} timed iterations take {WARMUP_ITERATIONS + repeat}·T"
    )
    return Lumped(Timeline(spans=spans), formula)
