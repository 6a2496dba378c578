"""The registry of lessons, in the order the course teaches them.

Every lesson of the unit is listed, built or not: the app's home screen and
`playground list` show the ones still to come as such, rather than hiding them.
A built lesson is its package's `LESSON` (its titles live there, once); a
planned one is a LessonInfo here until its package exists, then removed.

Adding a lesson: write scenarios/<name>/ (lesson.py, rank.py, its mechanism),
add its name to NAMES below, and drop its PLANNED entry.

Imports: lesson definitions only (no torch).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from scenarios.base import Lesson, LessonInfo

# Each built lesson's name, in course order; its package is the name with "_" for "-"
# (scenarios/ring_allreduce/). A command imports only the lesson it names (all eight
# took 80 ms of every `playground` command's start); the home screen, which lists them
# all, imports them all.
NAMES: tuple[str, ...] = (
    "why-distribute",
    "ring-allreduce",
    "zero",
    "failure-resume",
    "tensor-parallel",
    "pipeline",
    "mixed-precision",
    "inference",
)


class _Lessons(Mapping[str, Lesson]):
    """name -> Lesson, each lesson's package imported the first time it is asked for."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self._names = names
        self._loaded: dict[str, Lesson] = {}

    def __getitem__(self, name: str) -> Lesson:
        lesson = self._loaded.get(name)
        if lesson is None:
            if name not in self._names:
                raise KeyError(name)
            package = name.replace("-", "_")
            module = importlib.import_module(f"scenarios.{package}.lesson")
            lesson = self._loaded[name] = module.LESSON
            assert lesson.name == name, f"{module.__name__} defines {lesson.name!r}, not {name!r}"
        return lesson

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


LESSONS: Mapping[str, Lesson] = _Lessons(NAMES)

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
