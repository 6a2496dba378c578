"""Collectives timed between computes, and the scales they give the cost model.

Where it sits (docs/design.md): runtime's pure part, beside runtime.fit.calibration, whose
fit calls it. The calibrate job (runtime.fit.calibration_rank._busy_collective) times
collectives of BUSY_BYTES with every rank running a block's forward before each, as a
training step interleaves them; a collective timed alone never waits for a rank the
others' compute descheduled, a lesson's always does. Each scale is the median of
those times over the collective's formula at the fitted alpha, beta, gamma
(CostModel.collective_scale, keyed by runtime.sim.corrections.ScaleKey):

- the hand-made ring all-reduce: "all_reduce" the whole, "reduce_scatter" its first
  half and "all_gather" its second (busy_ring_scales);
- torch's own all-reduce: every "builtin.<kind>" (busy_scale);
- torch's own all-gather: "builtin.all_gather" (busy_gather_scale), the gloo
  all-gather failure-resume gathers its gradients with.

Pure: stdlib only.
"""

from __future__ import annotations

import statistics
from typing import Any

from runtime.sim import formulas

# The all-reduce timed between computes (collective_scale): a ZeRO unit's gradients.
# Enough repetitions that calibrations in a row agree on it (a dozen left zero's
# default prediction moving by a third between them); docs/lab-notebook.md has the figures.
BUSY_BYTES = 256 * 2**10
BUSY_REPS = 48
# The least collective_scale a calibration keeps (a guard against a degenerate fit).
MIN_SCALE = 0.1


def busy_ring_scales(
    rank_results: list[dict[str, Any]],
    world_size: int,
    alpha: float,
    beta: float,
    gamma: float,
) -> dict[str, float]:
    """The hand-made collectives' scales by kind, from the ring all-reduce timed between
    computes: "all_reduce" the whole (busy_scale), "reduce_scatter" its first half and
    "all_gather" its second, each over its own formula. The reduce-scatter waits out the
    skew the compute before it left; the all-gather starts on ranks the ring has lined
    up (here, 4 ranks on 2 cores, about two thirds of the reduce-scatter's half).
    Without the halves (an older result), every kind gets the whole's."""
    whole = busy_scale(rank_results, world_size, alpha, beta, gamma)
    pairs = [
        (took, half)
        for r in rank_results
        for took, half in zip(
            r.get("busy_all_reduce", []), r.get("busy_reduce_scatter", []), strict=False
        )
    ]
    scales = {"all_reduce": whole, "reduce_scatter": whole, "all_gather": whole}
    if pairs:
        rs = formulas.ring_reduce_scatter_time(world_size, BUSY_BYTES, alpha, beta, gamma)
        ag = formulas.ring_all_gather_time(world_size, BUSY_BYTES, alpha, beta)
        scales["reduce_scatter"] = max(MIN_SCALE, statistics.median(h for _, h in pairs) / rs)
        scales["all_gather"] = max(MIN_SCALE, statistics.median(t - h for t, h in pairs) / ag)
    return scales


def busy_scale(
    rank_results: list[dict[str, Any]],
    world_size: int,
    alpha: float,
    beta: float,
    gamma: float,
    timing: str = "busy_all_reduce",
) -> float:
    """How much longer a collective takes between computes than its formula says
    (runtime.fit.calibration_rank._busy_collective; `timing`: the hand-made ring's, or
    torch's own with "busy_builtin_all_reduce"): the median over ranks and repetitions
    of a rank's time (a span, as the lesson's spans are timed), over the ring all-reduce
    formula. It can be below 1: the formula's alpha and beta are a step's as the lesson
    times a whole ring (first rank in to last out, skew included: ring_step_time),
    this is one rank's own span; at least MIN_SCALE."""
    samples = [t for r in rank_results for t in r.get(timing, [])]
    if not samples:
        return 1.0
    took = statistics.median(samples)
    formula = formulas.ring_all_reduce_time(world_size, BUSY_BYTES, alpha, beta, gamma)
    return max(MIN_SCALE, took / formula) if formula > 0 else 1.0


def busy_gather_scale(
    rank_results: list[dict[str, Any]],
    world_size: int,
    alpha: float,
    beta: float,
    fallback: float,
) -> float:
    """torch's own all-gather of BUSY_BYTES in all between computes ("busy_builtin_all_gather")
    over the ring all-gather's formula; `fallback` (torch's all-reduce's scale) for a
    result without it. Torch's all-reduce is no guide to its all-gather on gloo: in
    three 4-rank calibrations here the all-gather's scale read 1.12-1.66, the
    all-reduce's 0.71-1.09."""
    samples = [t for r in rank_results for t in r.get("busy_builtin_all_gather", [])]
    formula = formulas.ring_all_gather_time(world_size, BUSY_BYTES, alpha, beta)
    if not samples or formula <= 0:
        return fallback
    return max(MIN_SCALE, statistics.median(samples) / formula)
