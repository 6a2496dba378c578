"""The link's half of a calibration: ring steps and a reduction, fitted to α, β, γ.

Part of runtime/fit (docs/design.md). The ranks time them (runtime.fit.calibration_rank:
`run_rank` with everything else, `run_links` alone); runtime.fit.calibration fits the
whole model with `fit_link`, and `lab nodes -- calibrate` (playground.lab_calibrate)
fits a node's link with it alone.

Pure: stdlib only.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# What the ranks time: one ring step of each size (bytes a step), by turns, and a
# reduction of REDUCE_BYTES (runtime.fit.calibration.REPS times each).
SIZES = (4 * 2**10, 64 * 2**10, 256 * 2**10, 2**20, 4 * 2**20)
REDUCE_BYTES = 4 * 2**20


@dataclass(frozen=True)
class LinkFit:
    """What the link's half of a calibration fits (fit_link): t = alpha + S·beta a ring
    step, gamma a byte reduced; the points and repetitions it was fitted from."""

    alpha: float
    beta: float
    gamma: float
    points: list[tuple[int, float]]
    per_size: list[list[float]]
    reduce_reps: list[float]


def fit_link(rank_results: list[dict[str, Any]], world_size: int) -> LinkFit:
    """Least-squares alpha, beta from a ring step per size as the lesson times it
    (ring_step_time), gamma from the reduce timing: the ranks' `sendrecv` and `reduce_s`
    (runtime.fit.calibration_rank: run_rank, or run_links alone)."""
    sizes = SIZES if world_size > 1 else ()
    # Each repetition's step time per size (the sizes took turns, repetition by repetition).
    per_size = [ring_step_times(r["sendrecv"][str(size)] for r in rank_results) for size in sizes]
    points = [(size, statistics.median(times)) for size, times in zip(sizes, per_size, strict=True)]
    alpha, beta = line_fit(points)
    reduce_reps = [
        max(rep) / REDUCE_BYTES for rep in zip(*(r["reduce_s"] for r in rank_results), strict=True)
    ]
    gamma = statistics.median(reduce_reps)
    return LinkFit(alpha, beta, gamma, points, per_size, reduce_reps)


def ring_step_time(per_rank: Iterable[list[list[float]]]) -> float:
    """Seconds per ring step at one size: the median over repetitions of ring_step_times."""
    return statistics.median(ring_step_times(per_rank))


def ring_step_times(per_rank: Iterable[list[list[float]]]) -> list[float]:
    """Seconds per ring step at one size, per repetition: from the first rank's start
    to the last rank's end, over its steps (each rank's row: [start, end, steps]). This
    is how the lesson times an iteration, so the ranks' skew leaving the barrier and the
    jitter one late rank passes along the ring (each step waits on the left neighbour's
    previous one) are in the figure, as in the run's."""
    reps = zip(*per_rank, strict=True)
    return [
        (max(end for _, end, _ in rep) - min(start for start, _, _ in rep)) / rep[0][2]
        for rep in reps
    ]


def line_fit(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares (alpha, beta) of t = alpha + S·beta, each at its floor; the floors
    alone without points (one rank alone has no link: never used)."""
    alpha, beta = 1e-7, 1e-13
    if len(points) > 1:
        mean_s = statistics.fmean(s for s, _ in points)
        mean_t = statistics.fmean(t for _, t in points)
        beta = sum((s - mean_s) * (t - mean_t) for s, t in points) / sum(
            (s - mean_s) ** 2 for s, _ in points
        )
        beta = max(beta, 1e-13)
        alpha = max(mean_t - beta * mean_s, 1e-7)
    return alpha, beta


def link_figures(
    sizes: Sequence[int], per_size: Sequence[list[float]], reduce_reps: Sequence[float]
) -> dict[str, tuple[float, float]]:
    """Each link figure's range over the repetitions: alpha and beta fitted on every
    size's fastest repetition and on its slowest (each figure's lower and higher of the
    two), gamma's fastest and slowest reduction. Informative (`calibrate` prints it):
    the interval itself comes from the paces (conditions.Spread)."""
    out: dict[str, tuple[float, float]] = {}
    if sizes:
        fast = line_fit([(s, min(t)) for s, t in zip(sizes, per_size, strict=True)])
        slow = line_fit([(s, max(t)) for s, t in zip(sizes, per_size, strict=True)])
        out["alpha"] = (min(fast[0], slow[0]), max(fast[0], slow[0]))
        out["beta"] = (min(fast[1], slow[1]), max(fast[1], slow[1]))
    if reduce_reps:
        out["gamma"] = (min(reduce_reps), max(reduce_reps))
    return out
