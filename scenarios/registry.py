"""The registry of lessons, in the order the course teaches them.

Every lesson of the unit is listed, built or not: the app's home screen and
`playground list` show the ones still to come as such, rather than hiding them.
A built lesson is its package's `LESSON` (its titles live there, once); a
planned one is a LessonInfo here until its package exists, then removed.

Adding a lesson (docs/adding-a-lesson.md): copy scenarios/_template/ to
scenarios/<name>/, then one line: its name in NAMES below (in course order), and
drop its PLANNED entry if it had one. A lesson that is not part of the course (the
template itself, a lesson being written, a test's copy of the template) is one call
instead, `register(name, package)`: `playground run/predict/show NAME` and
`get_lesson` find it, and nothing lists it (the home screen, `playground list` and
every loop over LESSONS see the course alone). Either way a lesson's package is
imported the first time it is asked for, never all of them at once.

Imports: lesson definitions only (no torch).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from scenarios.lesson_info import LessonInfo
from scenarios.texts import load_texts

if TYPE_CHECKING:  # the contract comes with the first lesson asked for, not before
    from scenarios.base import Lesson

# Each built lesson's name, in course order; its package is the name with "_" for "-"
# (scenarios/ring_allreduce/). A command imports only the lesson it names (all eight
# took 80 ms of every `playground` command's start); the home screen lists them all from
# their texts.toml, importing none.
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


# Lessons found by name but listed nowhere: name -> package (`register`). The template
# is one: `playground predict template` shows the package docs/adding-a-lesson.md copies.
_UNLISTED: dict[str, str] = {"template": "scenarios._template"}


def package_of(name: str) -> str:
    """The package of lesson `name`: a registered one's, else scenarios/<name with _>/."""
    return _UNLISTED.get(name) or f"scenarios.{name.replace('-', '_')}"


def register(name: str, package: str) -> None:
    """Make lesson `name`, the `LESSON` of `<package>.lesson`, known by name without
    listing it: `register("lesson-copy", "lesson_copy")`. The package is imported when
    the lesson is first asked for; its rank processes import it too, so it must be
    importable there (on sys.path as the ranks start). A course lesson cannot be
    replaced (ValueError); registering a name again replaces what it stood for."""
    if name in NAMES:
        raise ValueError(f"{name!r} is a lesson of the course; pick another name")
    _UNLISTED[name] = package
    LESSONS.forget(name)


def unregister(name: str) -> None:
    """Forget a lesson `register` added (a test cleaning up after itself)."""
    _UNLISTED.pop(name, None)
    LESSONS.forget(name)


class _Lessons(Mapping[str, "Lesson"]):
    """name -> Lesson, each lesson's package imported the first time it is asked for.
    Iterating gives the course (`names`); looking up also finds registered lessons."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self._names = names
        self._loaded: dict[str, Lesson] = {}

    def __getitem__(self, name: str) -> Lesson:
        lesson = self._loaded.get(name)
        if lesson is None:
            if name not in self:
                raise KeyError(name)
            module = importlib.import_module(f"{package_of(name)}.lesson")
            lesson = self._loaded[name] = module.LESSON
            assert lesson.name == name, f"{module.__name__} defines {lesson.name!r}, not {name!r}"
        return lesson

    def __contains__(self, name: object) -> bool:
        return name in self._names or name in _UNLISTED

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def forget(self, name: str) -> None:
        """Drop the lesson loaded under `name` (its registration changed)."""
        self._loaded.pop(name, None)


LESSONS = _Lessons(NAMES)

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
    """Every lesson of the unit, in course order, built or still to come. A course
    lesson's line is read from its texts.toml without importing its package (the home
    screen's first frame waits for none of the eight); its number is its place in NAMES,
    which each package's LESSON repeats (tests/test_contract.py checks they agree)."""
    built = [_info(NAMES.index(name), name) for name in LESSONS]
    planned = [info for info in PLANNED if info.scenario not in LESSONS]
    return sorted(built + planned, key=lambda info: info.lesson)


def _info(number: int, name: str) -> LessonInfo:
    texts = load_texts(package_of(name))
    return LessonInfo(number, name, texts.title, texts.summary, True)
