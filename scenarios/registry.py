"""The registry of lessons, in the order the course teaches them.

Every lesson of the unit is listed, built or not: the app's home screen and
`playground list` show the ones still to come as such, rather than hiding them.
A built lesson is its package's `LESSON` (its titles live there, once); a
planned one is a LessonInfo here until its package exists, then removed.

Adding a lesson: write scenarios/<name>/ (lesson.py, rank.py, its mechanism),
import its LESSON below, and drop its PLANNED entry.

Imports: lesson definitions only (no torch).
"""

from __future__ import annotations

from scenarios.base import Lesson, LessonInfo
from scenarios.failure_resume.lesson import LESSON as FAILURE_RESUME
from scenarios.inference.lesson import LESSON as INFERENCE
from scenarios.mixed_precision.lesson import LESSON as MIXED_PRECISION
from scenarios.pipeline.lesson import LESSON as PIPELINE
from scenarios.ring_allreduce.lesson import LESSON as RING_ALLREDUCE
from scenarios.tensor_parallel.lesson import LESSON as TENSOR_PARALLEL
from scenarios.why_distribute.lesson import LESSON as WHY_DISTRIBUTE
from scenarios.zero.lesson import LESSON as ZERO

LESSONS: dict[str, Lesson] = {
    lesson.name: lesson
    for lesson in (
        WHY_DISTRIBUTE,
        RING_ALLREDUCE,
        ZERO,
        FAILURE_RESUME,
        TENSOR_PARALLEL,
        PIPELINE,
        MIXED_PRECISION,
        INFERENCE,
    )
}

# Lessons of the unit not built yet (none now: every one has its package).
PLANNED: tuple[LessonInfo, ...] = ()


def get_lesson(name: str) -> Lesson:
    try:
        return LESSONS[name]
    except KeyError:
        raise KeyError(
            f"unknown scenario {name!r}; available: {', '.join(sorted(LESSONS))}"
        ) from None


def lessons() -> list[LessonInfo]:
    """Every lesson of the unit, in course order, built or still to come."""
    built = [lesson.info for lesson in LESSONS.values()]
    planned = [info for info in PLANNED if info.scenario not in LESSONS]
    return sorted(built + planned, key=lambda info: info.lesson)
