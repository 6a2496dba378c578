"""A lesson as the home screen and `playground list` show it: number, name, title, summary.

Apart from scenarios.base (which re-exports it) so that the home screen, drawn before
anything else, imports no more than the lessons' texts need (scenarios.registry), never
the lesson contract with the simulator and the refinement behind it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LessonInfo:
    """A lesson of the unit as the home screen and `playground list` show it."""

    lesson: int
    scenario: str
    title: dict[str, str]
    summary: dict[str, str]
    available: bool
