"""What a lesson tells the per-rank accounting: its unit of work, the memory categories, the straggler threshold.

Part of the lesson contract (docs/design.md), between a lesson and runtime's pure
per-rank accounting (runtime.engine.live_workers, runtime.engine.stragglers), which knows no
lesson. Every front end that builds a live view of a run's workers builds it
here, so they all count the same: the CLI and the app (playground.worker_figures,
playground.metrics_server) and the torchrun entry (scenarios.torchrun, whose
node view covers only the ranks of its node). The figures it hands over: the
lesson's `items` hook (tokens per rank per step), the memory categories of
scenarios.metrics.ALL_CATEGORIES, and the straggler threshold, 1.2 unless
PLAYGROUND_STRAGGLER_RATIO says otherwise (checked: above 1 and at most 10).

Imports: stdlib, runtime's pure part; never torch.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from runtime.engine.live_workers import LiveWorkers
from runtime.engine.stragglers import DEFAULT_THRESHOLD
from scenarios.metrics import ALL_CATEGORIES

if TYPE_CHECKING:
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


def worker_options(lesson: Lesson, params: Params) -> dict[str, Any]:
    """The keywords of runtime.engine.live_workers' LiveWorkers and workers_report for a run."""
    unit, items = lesson.items(params) or (None, None)
    try:
        threshold = straggler_ratio()
    except ValueError:
        threshold = DEFAULT_THRESHOLD  # the front ends refuse it before any run
    return {
        "items": items,
        "items_unit": unit,
        "threshold": threshold,
        "memory_categories": ALL_CATEGORIES,
    }


def live_workers(lesson: Lesson, params: Params, ranks: Sequence[int] | None = None) -> LiveWorkers:
    """An empty live view for a run of `lesson` with `params`, fed as records arrive;
    `ranks`: the ranks it accounts for (a node's, under torchrun), else all of them."""
    return LiveWorkers(params.world_size, ranks=ranks, **worker_options(lesson, params))
