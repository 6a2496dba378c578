"""Each rank's figures of an Outcome: the lesson's items, the straggler threshold, the memory categories.

Part of `playground/` in DESIGN.md, between playground.session and runtime's
pure per-rank accounting (runtime.live_workers, runtime.stragglers): it hands
them what only the front end knows: the lesson's unit of work (its `items`
hook: tokens per rank per step), the memory categories of the lesson contract
(scenarios.metrics.ALL_CATEGORIES) and the straggler threshold, 1.2 unless
PLAYGROUND_STRAGGLER_RATIO says otherwise (checked: a number from 1 to 10).

Never imports torch.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

from runtime.live_workers import LiveWorkers, workers_report
from runtime.stragglers import DEFAULT_THRESHOLD, WorkersReport
from runtime.trace import Timeline
from scenarios.metrics import ALL_CATEGORIES

if TYPE_CHECKING:
    from playground.session import Outcome
    from scenarios.base import Lesson
    from scenarios.params import Params

RATIO_ENV = "PLAYGROUND_STRAGGLER_RATIO"
MAX_RATIO = 10.0


def straggler_ratio() -> float:
    """The threshold of the straggler flag: PLAYGROUND_STRAGGLER_RATIO, else 1.2.
    ValueError (one line) for anything but a number above 1 and at most 10."""
    text = os.environ.get(RATIO_ENV, "").strip()
    if not text:
        return DEFAULT_THRESHOLD
    try:
        ratio = float(text)
    except ValueError:
        ratio = math.nan
    if not (math.isfinite(ratio) and 1.0 < ratio <= MAX_RATIO):
        raise ValueError(
            f"{RATIO_ENV}={text[:40]!r}: give a number above 1 and at most {MAX_RATIO:g} "
            "(a straggler's work over the median rank's; 1.2 by default)"
        )
    return ratio


def check_settings() -> None:
    """The environment's settings of this module: UsageError in one line if bad."""
    from playground.session import UsageError

    try:
        straggler_ratio()
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _options(lesson: Lesson, params: Params) -> dict:
    unit, items = lesson.items(params) or (None, None)
    try:
        threshold = straggler_ratio()
    except ValueError:
        threshold = DEFAULT_THRESHOLD  # the CLI and the app refuse it before any run
    return {
        "items": items,
        "items_unit": unit,
        "threshold": threshold,
        "memory_categories": ALL_CATEGORIES,
    }


def workers_of(outcome: Outcome, timeline: Timeline) -> WorkersReport:
    """The per-rank report of one of the outcome's timelines (measured or predicted)."""
    return workers_report(
        timeline, outcome.params.world_size, **_options(outcome.lesson, outcome.params)
    )


def live_workers(lesson: Lesson, params: Params) -> LiveWorkers:
    """An empty live view for a run of `lesson` with `params`, fed as records arrive."""
    return LiveWorkers(params.world_size, **_options(lesson, params))
