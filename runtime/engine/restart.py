"""The restart contract, as data: what a lesson asks of the supervisor, what each attempt's
ranks are told, and what the supervisor reports back.

In docs/design.md's picture this is runtime's pure part: scenarios/base.py names
RestartPolicy (a lesson that checkpoints returns one), runtime.engine.supervise acts on
it in the parent process, and a rank reads its Attempt from RankContext.attempt.
Keeping these types here, away from the supervisor, lets the UI import a lesson
without numpy or safetensors (the supervisor's checkpoint code needs them).

Pure: stdlib only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from runtime.sim.program import Program
from runtime.sim.trace import Span

# Appended by the supervisor to the label of a span of a failed attempt past the
# checkpoint the next attempt resumed from: its work was lost and done again.
LOST = " (lost)"


def is_lost(span: Span) -> bool:
    """True for a span whose work a failure threw away (it was recomputed after it)."""
    return span.label.endswith(LOST)


@dataclass(frozen=True)
class RestartPolicy:
    """How a lesson wants to be restarted after a failure, like `torchrun --max-restarts`.

    `program_for(world)` is the Program of an attempt on `world` ranks: a restart may
    resume on fewer ranks (`resume_world_size`), and every rank is handed its actions.
    """

    max_restarts: int
    program_for: Callable[[int], Program]
    resume_world_size: int | None = None  # ranks of every relaunch; None: the same


@dataclass(frozen=True)
class Attempt:
    """What the supervisor tells the ranks of one attempt (RankContext.attempt)."""

    index: int
    world_size: int
    checkpoint_dir: str
    fired_dir: str
    origin_file: str
    resume: str | None = None  # the checkpoint to resume from; None: from scratch
    resume_step: int = 0
    origin_ns: int | None = None  # time zero of the first attempt, for every later one


@dataclass(frozen=True)
class FailureReport:
    """One failure and the restart that followed it (times on the run's clock)."""

    rank: int | None
    cause: str
    failed_t: float | None
    detected_t: float
    restart_t: float
    resumed_t: float | None
    completed_step: int
    resumed_from_step: int

    @property
    def lost_steps(self) -> int:
        return max(0, self.completed_step - self.resumed_from_step)

    @property
    def detection_s(self) -> float | None:
        return None if self.failed_t is None else self.detected_t - self.failed_t

    @property
    def restart_s(self) -> float | None:
        return None if self.resumed_t is None else self.resumed_t - self.detected_t


@dataclass(frozen=True)
class RestartReport:
    """The supervisor's account of a run: every failure, and the ranks of each attempt."""

    world_sizes: list[int]
    failures: list[FailureReport] = field(default_factory=list)

    @property
    def restarts(self) -> int:
        return len(self.failures)

    @property
    def lost_steps(self) -> int:
        return sum(f.lost_steps for f in self.failures)
