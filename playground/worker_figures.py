"""Each rank's figures of an Outcome, and the front end's check of their settings.

Part of `playground/` in docs/design.md, between playground.session and runtime's
pure per-rank accounting (runtime.engine.live_workers, runtime.engine.stragglers). What a
lesson hands that accounting (its items, the memory categories, the straggler
threshold of PLAYGROUND_STRAGGLER_RATIO) is scenarios.workers', shared with the
torchrun entry; here the CLI and the app refuse a bad threshold in one line.

Never imports torch.
"""

from __future__ import annotations

import os
from typing import Protocol

from playground.i18n import t
from playground.usage import UsageError
from runtime.engine.live_workers import workers_report
from runtime.engine.stragglers import WorkersReport
from runtime.sim.trace import Timeline
from scenarios.base import Lesson
from scenarios.params import Params
from scenarios.workers import MAX_RATIO, RATIO_ENV, straggler_ratio, worker_options


class LessonRun(Protocol):
    """What the figures need of an outcome (playground.outcome.Outcome has it)."""

    lesson: Lesson
    params: Params


def check_settings() -> None:
    """The environment's settings of the per-rank figures: UsageError in one line if bad
    (English as scenarios.workers says it; Spanish from the catalog)."""
    try:
        straggler_ratio()
    except ValueError as exc:
        text = os.environ.get(RATIO_ENV, "").strip()
        es = t("settings.straggler_ratio", "es", env=RATIO_ENV, value=repr(text[:40]),
               most=f"{MAX_RATIO:g}")  # fmt: skip
        raise UsageError(str(exc), es=es) from None


def workers_of(outcome: LessonRun, timeline: Timeline) -> WorkersReport:
    """The per-rank report of one of the outcome's timelines (measured or predicted)."""
    return workers_report(
        timeline, outcome.params.world_size, **worker_options(outcome.lesson, outcome.params)
    )
