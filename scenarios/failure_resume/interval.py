"""How often to checkpoint: Young's and Daly's formulas, and a Monte-Carlo that checks them.

The "how often" half of lesson 3 (scenarios.failure_resume.lesson), the lesson's
own mechanism: numbers in, numbers out, no torch, seeded, fast enough for
`playground predict` (numpy, vectorised). The lesson imports it inside its
`metrics` only, so numpy stays off the app's start path.

The model (Daly 2006, the one his formula optimises): a job of W seconds of
work is cut into segments of τ seconds of compute, each followed by a
checkpoint that costs C. Failures arrive as a Poisson process of mean time
between failures M (exponential gaps). A failure loses the work since the last
completed checkpoint and costs a restart R; failures can strike while
computing, while writing a checkpoint and while restarting.

- Young (1974): τ ≈ √(2CM).
- Daly (2006): τ = √(2CM)·[1 + ⅓√(C/2M) + (1/9)(C/2M)] − C for C < 2M, else M.
- Expected wall time of the model, exact: T(τ) = M·e^{R/M}·(e^{(τ+C)/M} − 1)·W/τ
  (each segment is retried until a gap of τ+C without failure; memorylessness).
- Monte-Carlo: the same job, simulated failure by failure on many replicas, for
  every τ of a grid, with common random numbers (the same failure times for
  every τ), so the curve of overhead versus τ is smooth and its minimum is
  where the model's minimum is, not where the noise put it.

Overhead is T/W − 1: the fraction of extra time spent on checkpoints, lost work
and restarts.

`study(save_cost, mtbf, restart_cost)` is the whole curve, typed (IntervalStudy);
the lesson's metrics quote its optima (`interval_metrics`) and its `curves`
hook hands it to the HTML export as a Curve (`overhead_curve`). It is seeded
and cached, so both see the same numbers and the second call costs nothing.

Pure: stdlib, numpy and the lesson contract's metric types.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from scenarios.metrics import Curve, Metric


def young_interval(save_cost: float, mtbf: float) -> float:
    """Young (1974): √(2CM)."""
    return math.sqrt(2 * save_cost * mtbf)


def daly_interval(save_cost: float, mtbf: float) -> float:
    """Daly (2006), the higher-order estimate; M itself when C ≥ 2M."""
    c, m = save_cost, mtbf
    if c >= 2 * m:
        return m
    x = c / (2 * m)
    return math.sqrt(2 * c * m) * (1 + math.sqrt(x) / 3 + x / 9) - c


def expected_overhead(
    interval: float, save_cost: float, mtbf: float, restart_cost: float = 0.0
) -> float:
    """Exact expected overhead of the model: M·e^{R/M}·(e^{(τ+C)/M} − 1)/τ − 1."""
    m = mtbf
    return m * math.exp(restart_cost / m) * math.expm1((interval + save_cost) / m) / interval - 1


@dataclass(frozen=True)
class IntervalStudy:
    """Overhead versus checkpoint interval: three curves on one grid, and the optima."""

    save_cost: float  # C, seconds
    mtbf: float  # M, seconds
    restart_cost: float  # R, seconds
    intervals: tuple[float, ...]  # τ, seconds (a geometric grid around Young's)
    overhead_simulated: tuple[float, ...]  # T/W − 1 (a fraction), Monte-Carlo mean
    overhead_expected: tuple[float, ...]  # the exact expectation of the same model
    simulated_optimal_interval: float  # seconds
    young: float  # seconds
    daly: float  # seconds
    replicas: int
    work: float  # W, seconds of useful work per simulated run

    @property
    def overhead_at_optimum(self) -> float:
        """The lowest simulated overhead on the grid (a fraction)."""
        return min(self.overhead_simulated)


def simulate_overhead(
    intervals: np.ndarray,
    save_cost: float,
    mtbf: float,
    restart_cost: float = 0.0,
    *,
    work: float | None = None,
    replicas: int = 400,
    seed: int = 0,
) -> np.ndarray:
    """Mean overhead T/W − 1 for each interval, over `replicas` simulated runs.

    Every interval sees the same failure times (common random numbers). The loop
    runs once per failure, vectorised over intervals and replicas.
    """
    taus = np.asarray(intervals, dtype=float)[:, None]  # (G, 1)
    work = work if work is not None else 200 * mtbf  # a long run: ~200 failures
    segments = np.maximum(1, np.round(work / taus))  # whole segments of τ
    period = taus + save_cost
    worst = float(np.max(segments * period)) * 3 + 20 * mtbf
    n_fail = int(worst / mtbf + 6 * math.sqrt(worst / mtbf) + 16)
    rng = np.random.default_rng(seed)
    failures = np.cumsum(rng.exponential(mtbf, size=(replicas, n_fail)), axis=1)
    failures = np.concatenate([failures, np.full((replicas, 1), np.inf)], axis=1)

    shape = (taus.shape[0], replicas)
    t = np.zeros(shape)  # wall clock where the current segment attempt starts
    done = np.zeros(shape)  # segments completed
    k = np.zeros(shape, dtype=np.int64)  # index of the next failure
    rows = np.arange(replicas)[None, :]
    active = np.ones(shape, dtype=bool)
    while active.any():
        f = failures[rows, np.minimum(k, n_fail)]
        # Whole segments (compute + checkpoint) that fit before the next failure.
        room = np.floor(np.maximum(f - t, 0.0) / period)
        take = np.minimum(room, segments - done)
        done = np.where(active, done + take, done)
        t = np.where(active, t + take * period, t)
        finished = done >= segments
        hit = active & ~finished
        # The failure interrupts the segment (or the restart): lose it, restart.
        t = np.where(hit, np.maximum(f, t) + restart_cost, t)
        k = np.where(hit, k + 1, k)
        active = hit
        if (k >= n_fail).any():  # pragma: no cover - n_fail is sized with a wide margin
            raise RuntimeError("checkpoint-interval simulation ran out of failures")
    return (t / (segments * taus)).mean(axis=1) - 1


@lru_cache(maxsize=32)
def study(
    save_cost: float,
    mtbf: float,
    restart_cost: float = 0.0,
    *,
    points: int = 49,
    replicas: int = 400,
    seed: int = 0,
) -> IntervalStudy:
    """Overhead versus interval around Young's τ, and the simulated optimum (all in
    seconds: C = save_cost, M = mtbf, R = restart_cost).

    The optimum is the minimum of a least-squares fit a/τ + b + cτ + dτ² to the
    simulated points near the lowest one (the shape of the exact curve to second
    order), so that it lands between grid points and ignores residual noise.
    """
    young, daly = young_interval(save_cost, mtbf), daly_interval(save_cost, mtbf)
    upper = min(4 * young, 5 * mtbf)
    taus = np.geomspace(young / 4, max(upper, young * 1.5), points)
    sim = simulate_overhead(taus, save_cost, mtbf, restart_cost, replicas=replicas, seed=seed)
    best = int(np.argmin(sim))
    lo, hi = max(0, best - 12), min(points, best + 13)
    x, y = taus[lo:hi], sim[lo:hi]
    basis = np.stack([1 / x, np.ones_like(x), x, x * x], axis=1)
    coef, *_ = np.linalg.lstsq(basis, y, rcond=None)
    fine = np.geomspace(x[0], x[-1], 4001)
    fitted = coef[0] / fine + coef[1] + coef[2] * fine + coef[3] * fine * fine
    optimum = float(fine[int(np.argmin(fitted))])
    expected = tuple(expected_overhead(float(tau), save_cost, mtbf, restart_cost) for tau in taus)
    return IntervalStudy(
        save_cost=save_cost,
        mtbf=mtbf,
        restart_cost=restart_cost,
        intervals=tuple(float(v) for v in taus),
        overhead_simulated=tuple(float(v) for v in sim),
        overhead_expected=expected,
        simulated_optimal_interval=optimum,
        young=young,
        daly=daly,
        replicas=replicas,
        work=200 * mtbf,
    )


# -- what the lesson shows of a study ------------------------------------------------------
def interval_metrics(study: IntervalStudy) -> list[Metric]:
    """The three intervals, how far the simulated optimum is from Daly's, and the
    overhead there."""
    return [
        Metric("young_interval_s", "s", study.young),
        Metric("daly_interval_s", "s", study.daly),
        Metric("simulated_optimal_interval_s", "s", study.simulated_optimal_interval),
        Metric("simulated_vs_daly", "ratio", study.simulated_optimal_interval / study.daly),
        Metric("overhead_at_optimum_fraction", "fraction", study.overhead_at_optimum),
    ]


def overhead_curve(study: IntervalStudy, typed: dict[str, str]) -> Curve:
    """The study as a figure: overhead versus τ (log axis), the Monte-Carlo and the
    exact expectation, with Young's, Daly's and the simulated optimum as lines.
    `typed`: the lesson's params as typed (`3h`), for the title."""
    return Curve(
        title="How often to checkpoint: overhead vs interval "
        f"(M = {typed['mtbf']}, C = {typed['save_cost']}, R = {typed['restart_cost']})",
        x_label="checkpoint interval τ (s, compute between saves)",
        y_label="overhead of the useful work",
        x=list(study.intervals),
        lines={
            "Monte-Carlo (exponential failures)": list(study.overhead_simulated),
            "expected (exact, same model)": list(study.overhead_expected),
        },
        marks={
            "Young √(2CM)": study.young,
            "Daly": study.daly,
            "simulated optimum": study.simulated_optimal_interval,
        },
        y_unit="fraction",
        log_x=True,
    )
