"""Reading a step's overlap off a timeline, measured or predicted alike.

Lesson 6's measure of DDP's point: how much of the bucket all-reduces ran
while backward was still computing. Pure functions of Spans (runtime.sim.trace),
so the same numbers come from the ranks' spans and from the simulator's:

- `step_s`: a steady step's wall time, the period between steps' ends: from
  the last rank finishing step 1 to the last one finishing the last step, per
  step (what iterations/s counts). Steady: iteration 0 runs with one bucket
  (torch 2.13 builds the real buckets after it), so from step 2 on; with fewer
  steps, the median step from its first rank's start to its last one's end
  (its series' start barrier left out). The mean, not the median step: a step
  here swings ±50% from one to the next (13-44 ms), and the prediction after a
  run, built from its spans' sums, tracks their mean (after-run errors on 16
  captured runs replayed both ways: 1.9-10% per series, was 3.2-12%);
- `overlap_fraction`: of the time a rank's communication stream was busy (the
  union of its all-reduce spans, launch to end), the share inside its backward
  (first backward span's start to the last one's end), summed over ranks and
  steady steps;
- `no_overlap_s`: the step as it would be if every all-reduce ran after
  backward: compute plus the communication time, per rank, the slowest rank's,
  median over steady steps.

Pure: runtime's trace types only.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from runtime.sim.trace import Span, Timeline, mean_step_period

COMM = "all_reduce"
BACKWARD = "B"
NOT_COMPUTE = frozenset({COMM, "wait", "barrier"})


FIRST_STEADY = 2  # steps count from 1; the first runs with torch's one initial bucket


def warmup_steps(steps: int) -> int:
    """What the timing leaves out, as Hooks.warmup_steps counts it (the steps before
    FIRST_STEADY), so that the model refined after a run leaves it out too: step 1, when
    there is another."""
    return FIRST_STEADY if steps >= FIRST_STEADY else 0


def steps_of(timeline: Timeline, series: str) -> dict[int, list[Span]]:
    """The series' spans by step, steady steps only (step 1 alone if there is no other)."""
    by_step: dict[int, list[Span]] = defaultdict(list)
    for span in timeline.of_series(series):
        if span.step is not None:
            by_step[span.step].append(span)
    steady = {k: v for k, v in by_step.items() if k >= FIRST_STEADY}
    return steady or dict(by_step)


def union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for lo, hi in sorted(intervals):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def length(intervals: list[tuple[float, float]]) -> float:
    return sum(hi - lo for lo, hi in intervals)


def step_s(timeline: Timeline, series: str) -> float | None:
    steps = steps_of(timeline, series)
    if not steps:
        return None
    period = mean_step_period(timeline.of_series(series), min(steps), max(steps))
    if period is not None:  # from the end of the step before the steady ones
        return period
    return statistics.median(
        max(s.end for s in spans) - min(s.start for s in spans) for spans in steps.values()
    )


def _by_rank(spans: list[Span]) -> dict[int, list[Span]]:
    out: dict[int, list[Span]] = defaultdict(list)
    for span in spans:
        out[span.rank].append(span)
    return out


def overlap_fraction(timeline: Timeline, series: str) -> float | None:
    hidden = total = 0.0
    for spans in steps_of(timeline, series).values():
        for mine in _by_rank(spans).values():
            comm = union([(s.start, s.end) for s in mine if s.kind == COMM])
            backward = [s for s in mine if s.kind == BACKWARD]
            if not comm or not backward:
                continue
            lo, hi = min(s.start for s in backward), max(s.end for s in backward)
            total += length(comm)
            hidden += sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in comm)
    return hidden / total if total > 0 else None


def no_overlap_s(timeline: Timeline, series: str) -> float | None:
    per_step = []
    for spans in steps_of(timeline, series).values():
        slowest = 0.0
        for mine in _by_rank(spans).values():
            compute = sum(s.duration for s in mine if s.kind not in NOT_COMPUTE)
            comm = length(union([(s.start, s.end) for s in mine if s.kind == COMM]))
            slowest = max(slowest, compute + comm)
        per_step.append(slowest)
    return statistics.median(per_step) if per_step else None
