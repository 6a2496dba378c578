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
hook hands it to the app and the HTML export as a Curve (scenarios.failure_resume
.curve). It is seeded
and cached, so both see the same numbers and the second call costs nothing.

Pure: stdlib, numpy and the lesson contract's metric types.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from scenarios.metrics import Metric

# Each simulated run does this many MTBFs of useful work (~200 failures at small C/M)…
WORK_MTBFS = 200
# …unless all the runs of a study would then expect more failures than this in all: the
# loop costs one step per failure, so the longest intervals get fewer segments (shorter
# runs, each still unbiased) until they fit; a fifth of a second on a laptop core.
FAILURE_BUDGET = 10_000_000
# An interval whose single segment of τ + C expects more failures than this is not
# simulated: its runs would be a chain of restarts (and a long tail of unlucky ones).
MAX_FAILURES_PER_SEGMENT = 100


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
    """Exact expected overhead of the model: M·e^{R/M}·(e^{(τ+C)/M} − 1)/τ − 1 (inf when
    it is past what a float holds: a job that essentially never finishes)."""
    m = mtbf
    try:
        return (
            m * math.exp(restart_cost / m) * math.expm1((interval + save_cost) / m) / interval - 1
        )
    except OverflowError:
        return math.inf


def failures_per_segment(
    interval: float, save_cost: float, mtbf: float, restart_cost: float
) -> float:
    """Failures one segment of τ + C expects before it gets through: e^{R/M}(e^{(τ+C)/M} − 1)
    (the model's expected time for it, over M); inf past what a float holds."""
    try:
        return math.exp(restart_cost / mtbf) * math.expm1((interval + save_cost) / mtbf)
    except OverflowError:
        return math.inf


@dataclass(frozen=True)
class IntervalStudy:
    """Overhead versus checkpoint interval: three curves on one grid, and the optima."""

    save_cost: float  # C, seconds
    mtbf: float  # M, seconds
    restart_cost: float  # R, seconds
    intervals: tuple[float, ...]  # τ, seconds (a geometric grid around Young's)
    overhead_simulated: tuple[float, ...]  # T/W − 1 (a fraction), Monte-Carlo mean; nan: not run
    overhead_expected: tuple[float, ...]  # the exact expectation of the same model
    simulated_optimal_interval: float | None  # seconds (None: no τ could be simulated)
    young: float  # seconds
    daly: float  # seconds
    replicas: int
    work: float  # W, seconds of useful work per simulated run (at most: see `capped`)
    capped: str = ""  # what the Monte-Carlo left out to stay bounded, said in the output
    capped_es: str = ""  # the same, in Spanish

    @property
    def overhead_at_optimum(self) -> float | None:
        """The lowest simulated overhead on the grid (a fraction; None if none ran)."""
        ran = [v for v in self.overhead_simulated if math.isfinite(v)]
        return min(ran) if ran else None


def simulate_overhead(
    intervals: np.ndarray,
    save_cost: float,
    mtbf: float,
    restart_cost: float = 0.0,
    *,
    work: float | None = None,
    segments: np.ndarray | None = None,
    replicas: int = 400,
    seed: int = 0,
) -> np.ndarray:
    """Mean overhead T/W − 1 for each interval, over `replicas` simulated runs of
    `work` seconds of useful work (or of `segments[i]` segments of τ_i each).

    Every interval sees the same failure times (common random numbers). The loop
    runs once per failure, vectorised over the runs still going (finished ones
    leave the arrays, so the work is the failures simulated, not the slowest run
    times all); each run takes as many failures as it needs (drawn in blocks,
    continuing the same sequence).
    """
    taus = np.asarray(intervals, dtype=float)
    if segments is None:
        work = work if work is not None else WORK_MTBFS * mtbf  # a long run: ~200 failures
        runs = np.maximum(1, np.round(work / taus))  # whole segments of τ
    else:
        runs = np.asarray(segments, dtype=float)
    period = taus + save_cost
    worst = float(np.max(runs * period)) * 3 + 20 * mtbf
    expected = max(
        failures_per_segment(float(tau), save_cost, mtbf, restart_cost) * float(count)
        for tau, count in zip(taus, runs, strict=True)
    )
    most = max(worst / mtbf, expected)
    n_fail = int(most + 6 * math.sqrt(most) + 16)
    rng = np.random.default_rng(seed)
    failures = np.cumsum(rng.exponential(mtbf, size=(replicas, n_fail)), axis=1)

    # One entry per (interval, replica) still running: its interval, replica, clock
    # (where its current segment attempt starts), segments done, next failure.
    g = np.repeat(np.arange(taus.size), replicas)
    rep = np.tile(np.arange(replicas), taus.size)
    t = np.zeros(g.size)
    done = np.zeros(g.size)
    k = np.zeros(g.size, dtype=np.int64)
    ends = np.zeros(g.size)  # each run's wall time, once finished
    where = np.arange(g.size)
    while where.size:
        if int(k.max()) >= failures.shape[1]:  # a run needs more failures: draw them
            more = np.cumsum(rng.exponential(mtbf, size=(replicas, n_fail)), axis=1)
            failures = np.concatenate([failures, failures[:, -1:] + more], axis=1)
        f = failures[rep, k]
        # Whole segments (compute + checkpoint) that fit before the next failure.
        room = np.floor(np.maximum(f - t, 0.0) / period[g])
        take = np.minimum(room, runs[g] - done)
        done += take
        t += take * period[g]
        finished = done >= runs[g]
        ends[where[finished]] = t[finished]
        hit = ~finished
        # The failure interrupts the segment (or the restart, which starts again):
        # the work since the last checkpoint is lost, and a restart begins at once.
        g, rep, where, done = g[hit], rep[hit], where[hit], done[hit]
        t, k = f[hit] + restart_cost, k[hit] + 1
    overhead = ends.reshape(taus.size, replicas) / (runs * taus)[:, None]
    return overhead.mean(axis=1) - 1


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
    """Overhead versus interval around Young's and Daly's τ, and the simulated optimum
    (all in seconds: C = save_cost, M = mtbf, R = restart_cost), for any C and R.

    The Monte-Carlo's work is bounded, not its correctness: each simulated run of
    interval τ does 200·M of useful work, or, when the study would then simulate
    more than FAILURE_BUDGET failures, the longest intervals do fewer segments of τ
    (shorter runs, each still unbiased); an interval whose single segment expects
    more than MAX_FAILURES_PER_SEGMENT failures is not simulated (its point is left
    out and the exact expectation stands alone). `capped` says which happened.

    The optimum is the minimum of a least-squares fit a/τ + b + cτ + dτ² to the
    simulated points near the lowest one (the shape of the exact curve to second
    order), so that it lands between grid points and ignores residual noise.
    """
    young, daly = young_interval(save_cost, mtbf), daly_interval(save_cost, mtbf)
    upper = max(min(4 * young, 5 * mtbf), 2 * daly)
    taus = np.geomspace(min(young / 4, daly / 2), upper, points)
    per_segment = [failures_per_segment(float(tau), save_cost, mtbf, restart_cost) for tau in taus]
    feasible = np.array([f <= MAX_FAILURES_PER_SEGMENT for f in per_segment])
    whole = [max(1.0, round(WORK_MTBFS * mtbf / float(tau))) for tau in taus[feasible]]
    kept = [f for f, ok in zip(per_segment, feasible, strict=True) if ok]
    runs = _fit_budget(whole, kept, replicas)
    sim = np.full(points, np.nan)
    if feasible.any():
        sim[feasible] = simulate_overhead(
            taus[feasible],
            save_cost,
            mtbf,
            restart_cost,
            segments=np.array(runs),
            replicas=replicas,
            seed=seed,
        )
    optimum = _optimum(taus, sim)
    expected = tuple(expected_overhead(float(tau), save_cost, mtbf, restart_cost) for tau in taus)
    shortened = sum(r < n for r, n in zip(runs, whole, strict=True))
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
        work=WORK_MTBFS * mtbf,
        capped=_capped(points - int(feasible.sum()), shortened, points),
        capped_es=_capped(points - int(feasible.sum()), shortened, points, "es"),
    )


def _optimum(taus: np.ndarray, sim: np.ndarray) -> float | None:
    """Where a fit of the simulated points around the lowest one is lowest."""
    ran = np.flatnonzero(np.isfinite(sim))
    if ran.size == 0:
        return None
    x_all, y_all = taus[ran], sim[ran]
    best = int(np.argmin(y_all))
    lo, hi = max(0, best - 12), min(ran.size, best + 13)
    x, y = x_all[lo:hi], y_all[lo:hi]
    if x.size < 4:
        return float(x_all[best])
    basis = np.stack([1 / x, np.ones_like(x), x, x * x], axis=1)
    coef, *_ = np.linalg.lstsq(basis, y, rcond=None)
    fine = np.geomspace(x[0], x[-1], 4001)
    fitted = coef[0] / fine + coef[1] + coef[2] * fine + coef[3] * fine * fine
    return float(fine[int(np.argmin(fitted))])


def _fit_budget(whole: list[float], per_segment: list[float], replicas: int) -> list[float]:
    """Segments per run for each interval: all of `whole` if the study's expected failures
    fit FAILURE_BUDGET, else at most `level` expected failures per run, the largest
    level that fits (every interval keeps at least one segment)."""

    def runs(level: float) -> list[float]:
        pairs = zip(whole, per_segment, strict=True)
        return [n if level / f >= n else max(1.0, math.floor(level / f)) for n, f in pairs]

    def failures(level: float) -> float:
        return replicas * sum(n * f for n, f in zip(runs(level), per_segment, strict=True))

    if failures(math.inf) <= FAILURE_BUDGET:
        return list(whole)
    low, high = 0.0, max(n * f for n, f in zip(whole, per_segment, strict=True))
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if failures(middle) <= FAILURE_BUDGET else (low, middle)
    return runs(low)


def _capped(skipped: int, shortened: int, points: int, language: str = "en") -> str:
    """What the Monte-Carlo left out to stay bounded, in words ("" when nothing), in
    `language` (en, es)."""
    said = []
    if language == "es":
        if shortened:
            said.append(
                f"{shortened} de {points} intervalos simulados en ejecuciones de menos de "
                f"{WORK_MTBFS}·M de trabajo (a lo sumo {FAILURE_BUDGET:,} fallos simulados en "
                "total)"
            )
        if skipped:
            said.append(
                f"{skipped} de {points} intervalos sin simular: un solo segmento de τ + C "
                f"espera más de {MAX_FAILURES_PER_SEGMENT} fallos, "
                "e^{R/M}(e^{(τ+C)/M} − 1); ahí queda solo la esperanza exacta"
            )
        return "; ".join(said)
    if shortened:
        said.append(
            f"{shortened} of {points} intervals simulated on runs shorter than "
            f"{WORK_MTBFS}·M of work (at most {FAILURE_BUDGET:,} failures simulated in all)"
        )
    if skipped:
        said.append(
            f"{skipped} of {points} intervals not simulated: one segment of τ + C alone "
            f"expects more than {MAX_FAILURES_PER_SEGMENT} failures, e^{{R/M}}(e^{{(τ+C)/M}} − 1); "
            "the exact expectation stands alone there"
        )
    return "; ".join(said)


# -- what the lesson shows of a study ------------------------------------------------------
def interval_metrics(study: IntervalStudy) -> list[Metric]:
    """The three intervals, how far the simulated optimum is from Daly's, and the
    overhead there."""
    simulated = study.simulated_optimal_interval
    out = [
        Metric("young_interval_s", "s", study.young),
        Metric("daly_interval_s", "s", study.daly),
        Metric("simulated_optimal_interval_s", "s", simulated),
        Metric("simulated_vs_daly", "ratio", simulated / study.daly if simulated else None),
        Metric("overhead_at_optimum_fraction", "fraction", study.overhead_at_optimum),
    ]
    if study.capped:  # the Monte-Carlo bounded its work: say what it left out
        out.append(Metric("monte_carlo_capped", "text", study.capped, es=study.capped_es or None))
    return out
