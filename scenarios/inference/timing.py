"""The plan's clock: how long an iteration takes on each stage, and the hops between.

Part of lesson 7's mechanism, pure. The drivers (scenarios.inference.serve) cost each
iteration with a Timing's `stage`; a run of alike decode iterations asks `along` for
one stage's seconds iteration after iteration (StageCost.decode,
scenarios.inference.stagecost, gives the same floats quicker; without it each
iteration's Work is made and costed). The plan builds its Timing from the step model
(scenarios.inference.plan, .stepmodel).
Pure: stdlib only (and the lesson's pure modules).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from scenarios.inference.stepmodel import Work

Seconds = Callable[[int, Work], float]  # (stage, work) -> seconds


class Along(Protocol):
    """A stage's seconds along a run of decode iterations (StageCost.decode)."""

    def __call__(self, j: int) -> float:
        """The j-th iteration's seconds."""
        ...

    def walk(self, t: float, count: int, until: float) -> list[float]:
        """From `t`, back to back, at most `count` iterations, none starting at `until`
        or later: their (start, end), flattened."""
        ...


class _Stepped:
    """Along, from a Timing's `stage` alone: each iteration's Work made and costed."""

    def __init__(self, stage: Seconds, s: int, work: Work, step: int) -> None:
        self.stage, self.s, self.work, self.step = stage, s, work, step

    def __call__(self, j: int) -> float:
        grown = j * self.step
        return self.stage(
            self.s, self.work._replace(attn=self.work.attn + grown, kv=self.work.kv + grown)
        )

    def walk(self, t: float, count: int, until: float) -> list[float]:
        bounds: list[float] = []
        j = 0
        while j < count and t < until:
            end = t + self(j)
            bounds += (t, end)
            t = end
            j += 1
        return bounds


# (stage, a run's first work, its growth an iteration) -> its seconds along the run
Series = Callable[[int, Work, int], Along]


@dataclass(frozen=True)
class Timing:
    """How long an iteration takes on each stage, and the hops between stages."""

    stage: Seconds
    stages: int = 1
    hop: Callable[[Work], float] = lambda work: 0.0
    back: Callable[[Work], float] = lambda work: 0.0
    series: Series | None = None  # `stage` along a run, quicker (the same floats)

    def along(self, s: int, work: Work, step: int) -> Along:
        """Stage s's seconds along a run of decode iterations starting with `work`."""
        if self.series is not None:
            return self.series(s, work, step)
        return _Stepped(self.stage, s, work, step)
