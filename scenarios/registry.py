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
from scenarios.pipeline.lesson import LESSON as PIPELINE
from scenarios.ring_allreduce.lesson import LESSON as RING_ALLREDUCE
from scenarios.zero.lesson import LESSON as ZERO

LESSONS: dict[str, Lesson] = {
    lesson.name: lesson for lesson in (RING_ALLREDUCE, ZERO, PIPELINE, FAILURE_RESUME, INFERENCE)
}

PLANNED = (
    LessonInfo(
        0,
        "why-distribute",
        {"es": "¿Por qué distribuir?", "en": "Why distribute at all"},
        {
            "es": "Presión de memoria o de tiempo, y el coste de un experimento en la nube.",
            "en": "Memory pressure vs time pressure, and the cost of a cloud experiment.",
        },
        False,
    ),
    LessonInfo(
        4,
        "tensor-parallel",
        {"es": "Paralelismo de tensores", "en": "Tensor parallelism"},
        {
            "es": "Un bloque Transformer entero partido entre GPUs a la Megatron.",
            "en": "A whole Transformer block split across GPUs, Megatron style.",
        },
        False,
    ),
    LessonInfo(
        6,
        "mixed-precision",
        {"es": "Precisión mixta y buckets", "en": "Mixed precision and bucketing"},
        {
            "es": "Escalado de la pérdida y buckets de DDP que solapan la comunicación.",
            "en": "Loss scaling and DDP buckets that overlap communication.",
        },
        False,
    ),
)


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
