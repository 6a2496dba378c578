"""Checking a lesson's challenges against an outcome, and keeping the learner's answers.

Part of `playground/` in docs/design.md (issue 40, items 1 and 2), between the lesson's
declared goal (scenarios.goals, `scenarios/<lesson>/challenges.py`) and what the app
shows (playground.widgets.challenges). After each outcome the lesson screen calls
`check`: a challenge is met when the outcome is the kind it asks for (a real run of
this app's ranks, or a prediction where the lesson is arithmetic), its predicate holds
on the outcome's metrics, and, where it asked the learner first, the answer given
before that outcome is right. A saved run opened from a file is nobody's run here: it
meets nothing. Progress (playground.progress) keeps what was met and the comparison.

Imports: scenarios' pure part and playground.progress; never torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from playground.progress import LessonProgress
from scenarios.base import Lesson
from scenarios.goals import Answer, AnswerError, Challenge, Facts, Goal, load_goal


def lesson_package(lesson: Lesson) -> str:
    """The lesson's package ("scenarios.zero"), read off its rank entry."""
    return lesson.rank_entry.partition(":")[0].rpartition(".")[0]


def goal_of(lesson: Lesson) -> Goal | None:
    """The lesson's goal, or None for a lesson that declares none (a copy of the template)."""
    return _goal(lesson_package(lesson))


@cache
def _goal(package: str) -> Goal | None:
    try:
        return load_goal(package)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.endswith(".challenges"):
            return None
        raise


def shown(value: Answer | None) -> str | None:
    """An answer or a figure as the learner reads it: 4 significant digits, or the word."""
    if value is None:
        return None
    if isinstance(value, str):
        return value[:64]
    return f"{value:.4g}"


@dataclass(frozen=True)
class Verdict:
    """What one outcome said of one challenge: `met` (None: not checked, it needs a real
    run or an answer first), and the comparison where the learner answered."""

    challenge: Challenge
    met: bool | None
    yours: str | None = None
    model: str | None = None
    measured: str | None = None


def answer(progress: LessonProgress, challenge: Challenge, text: str) -> Answer:
    """Keep the learner's answer to `challenge` until the next outcome checks it;
    scenarios.goals.AnswerError (one line per language) if it is not an answer."""
    if challenge.ask is None:
        raise ValueError(f"challenge {challenge.id} asks nothing")
    value = challenge.ask.parse(text)
    state = progress.state(challenge.id)
    state.answer = value if isinstance(value, str) else f"{value:.12g}"
    state.pending = True
    state.yours = state.model = state.measured = None
    return value


def check(
    goal: Goal, progress: LessonProgress, facts: Facts, *, prediction_counts: bool = True
) -> list[Verdict]:
    """Check every challenge on `facts`, updating `progress`; the verdicts, in order.
    `prediction_counts`: False for an outcome that is neither a run here nor a fresh
    prediction (a saved run opened from a file)."""
    verdicts = []
    for challenge in goal.challenges:
        state = progress.state(challenge.id)
        counts = facts.ran if challenge.by == "run" else (facts.ran or prediction_counts)
        ask = challenge.ask
        if not counts or (ask is not None and not state.pending):
            verdicts.append(Verdict(challenge, None))
            continue
        met = bool(challenge.check(facts))
        yours = model = measured = None
        if ask is not None and state.answer is not None:
            try:
                typed = ask.parse(state.answer)
            except AnswerError:  # a file edited by hand: no answer, so not met
                typed = None
            met = met and typed is not None and ask.right(typed, facts)
            yours, model, measured = state.answer, shown(ask.model(facts)), shown(ask.truth(facts))
            state.yours, state.model, state.measured = yours, model, measured
            state.pending = False
        state.met = state.met or met
        verdicts.append(Verdict(challenge, met, yours, model, measured))
    return verdicts
