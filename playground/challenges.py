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

from playground import progress as progress_store
from playground.progress import ChallengeState, LessonProgress
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


def comparison(state: ChallengeState | Verdict, language: str) -> str:
    """ "yours 6e+06 · model 6.291e+06 · measured 6.291e+06" (the parts known)."""
    from playground.i18n import t

    parts = []
    for key, value in (
        ("yours", state.yours),
        ("model", state.model),
        ("measured", state.measured),
    ):
        if value is not None:
            parts.append(f"{t('app.challenge_' + key, language)} {value}")
    return " · ".join(parts)


def record(lesson: Lesson, facts: Facts, *, prediction_counts: bool) -> list[Verdict]:
    """Check `lesson`'s challenges on an outcome outside the app (`playground run` or
    `predict`) and keep what it met in the learner's progress, as the app does; the
    verdicts of the challenges it checked (none for a lesson without a goal)."""
    goal = goal_of(lesson)
    if goal is None:
        return []
    progress = progress_store.load(lesson.name)
    verdicts = check(goal, progress, facts, prediction_counts=prediction_counts)
    checked = [v for v in verdicts if v.met is not None]
    if any(v.met or v.yours is not None for v in checked):  # met, or an answer used
        progress_store.save(progress)
    return checked


def outcome_lines(lesson: Lesson, params: object, metrics: list, ran: bool) -> list[str]:
    """What `playground run` or `predict` says of the lesson's challenges after its
    report: each met (✓) or answered wrong (✗, with the comparison), kept in the
    learner's progress; a progress file that is not ours is said in one line and left."""
    from playground.i18n import default_language, t
    from playground.progress import ProgressError

    language = default_language()
    try:
        verdicts = record(lesson, Facts(params, tuple(metrics), ran), prediction_counts=not ran)
    except ProgressError as exc:
        return [exc.text(language)]
    goal = goal_of(lesson)
    lines = []
    for verdict in verdicts:
        n = goal.challenges.index(verdict.challenge) + 1 if goal else 0
        text = verdict.challenge.text[language]
        if verdict.met:
            lines.append(f"✓ {t('app.challenge_met_n', language, n=n)}: {text}")
        elif verdict.yours is not None:
            said = comparison(verdict, language)
            lines.append(f"✗ {t('app.challenge_not_met_n', language, n=n)}: {text} ({said})")
    return lines
