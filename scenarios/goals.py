"""A lesson's goal and its challenges: what the learner will be able to explain, and
targets that only a real run (or, in a lesson of pure arithmetic, a prediction) can meet.

Part of docs/design.md's lesson contract, beside the texts: each lesson package
declares `GOAL` in its `challenges.py` (2-4 outcomes, 4-8 challenges, what a teacher
discusses, how long each part takes). A challenge is a predicate over the outcome's
typed metrics and params (`Facts`), so it is met by what the ranks measured, never by
a button. It may first ask for the learner's own number or choice (`Ask`): given before
the run, it is then shown beside the model's prediction and the measurement, and the
challenge is met only when the answer is right too (issue 40, items 1 and 2).

The app (playground.challenges, playground.widgets.challenges) checks them after each
outcome and keeps the learner's progress; the teacher's pages (playground.docs_gen)
print them with their answers. Every text is bilingual, checked by `check_goal`.

Imports: the lesson contract's pure types only (no torch, no playground).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from scenarios.metrics import Metric, find
from scenarios.texts import LANGUAGES

Bilingual = dict[str, str]
Answer = float | str


def both(en: str, es: str) -> Bilingual:
    """A text in each language (the catalogs' order: es, en)."""
    return {"es": es, "en": en}


@dataclass(frozen=True)
class Facts:
    """What a challenge may look at: the params an outcome was made with, its metrics,
    and whether real ranks ran it (`ran`) or the model predicted it."""

    params: Any
    metrics: tuple[Metric, ...]
    ran: bool

    def metric(self, name: str, series: str | None = None) -> Metric | None:
        """The metric `name` of exactly `series` (None: of a lesson without series, or
        the first of that name): never another series' figure in its place."""
        if series is None:
            return find(list(self.metrics), name)
        return next((m for m in self.metrics if m.name == name and m.series == series), None)

    def measured(self, name: str, series: str | None = None) -> Any:
        metric = self.metric(name, series)
        return metric.value if metric is not None else None

    def predicted(self, name: str, series: str | None = None) -> Any:
        metric = self.metric(name, series)
        return metric.predicted if metric is not None else None

    def value(self, name: str, series: str | None = None) -> Any:
        """The measured value where there is one, else the predicted (or exact) one."""
        measured = self.measured(name, series)
        return measured if measured is not None else self.predicted(name, series)

    def number(self, name: str, series: str | None = None) -> float | None:
        """`value` as one finite number (a per-rank list: its largest), else None."""
        value = self.value(name, series)
        if isinstance(value, list):
            value = max((v for v in value if isinstance(v, int | float)), default=None)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value) if math.isfinite(value) else None

    def by_series(self, name: str) -> dict[str | None, float]:
        """`number(name, series)` of every series that has the metric."""
        out: dict[str | None, float] = {}
        for metric in self.metrics:
            if metric.name == name and metric.series not in out:
                number = self.number(name, metric.series)
                if number is not None:
                    out[metric.series] = number
        return out

    def flag(self, name: str, series: str | None = None) -> bool:
        return self.value(name, series) is True

    def near(self, name: str, target: float, within: float = 0.05) -> bool:
        """The metric is within `within` (a fraction) of `target`."""
        number = self.number(name)
        return number is not None and abs(number - target) <= within * abs(target)


# A choice typed in Spanish where the choices are English words.
SPANISH_CHOICES = {
    "sí": "yes",
    "si": "yes",
    "ninguna": "none",
    "memoria": "memory",
    "tiempo": "time",
    "ambas": "both",
}


class AnswerError(ValueError):
    """An answer that is not a number, or not one of the choices: one line per language."""

    def __init__(self, en: str, es: str):
        super().__init__(en)
        self.texts = both(en, es)


@dataclass(frozen=True)
class Ask:
    """The learner's own number or choice, asked before the run.

    `truth(facts)`: what the run measured (or what is exact); `model(facts)`: what the
    cost model predicted, None where it predicts nothing. A number is right within
    `tolerance` (a fraction) of the truth; a choice is right when it is the truth."""

    prompt: Bilingual
    truth: Callable[[Facts], Answer | None]
    model: Callable[[Facts], Answer | None] = lambda _facts: None
    choices: tuple[str, ...] = ()
    tolerance: float = 0.1
    absolute: float = 0.0  # a number is right within this much too (a fraction near 0)

    def parse(self, text: str) -> Answer:
        """The answer typed (`6291456`, `6e6`, `1f1b`): AnswerError if it is not one."""
        text = text.strip()
        if self.choices:
            word = SPANISH_CHOICES.get(text.lower(), text.lower())  # "sí" is "yes"
            if word in self.choices:
                return word
            allowed = ", ".join(self.choices)
            raise AnswerError(f"answer one of: {allowed}", f"responda una de: {allowed}")
        try:
            number = float(text.replace(",", ""))
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise AnswerError(
                "answer a number (e.g. 12 or 1.5e6)", "responda un número (p. ej. 12 o 1.5e6)"
            )
        return number

    def right(self, answer: Answer, facts: Facts) -> bool:
        truth = self.truth(facts)
        if truth is None:
            return False
        if self.choices or isinstance(truth, str):
            return str(answer) == str(truth)
        if isinstance(answer, str):
            return False
        return abs(answer - float(truth)) <= max(self.tolerance * abs(float(truth)), self.absolute)


@dataclass(frozen=True)
class Challenge:
    """A question or a target, reached with the lesson's own knobs.

    `check(facts)` says whether an outcome meets it; `by`: what outcome may ("run": real
    ranks only; "predict": a prediction too, where the lesson is pure arithmetic).
    `answer` and `why` are the teacher's (docs/lessons/); `minutes`, the time it takes."""

    id: str
    text: Bilingual
    hint: Bilingual
    check: Callable[[Facts], bool]
    answer: Bilingual
    why: Bilingual
    by: Literal["run", "predict"] = "run"
    ask: Ask | None = None
    minutes: int = 5


@dataclass(frozen=True)
class Goal:
    """What the lesson is for: `outcomes` (what the learner can explain at the end), the
    `challenges` in order, what to `discuss` in class, and `timings` (part, minutes)."""

    outcomes: tuple[Bilingual, ...]
    challenges: tuple[Challenge, ...]
    discuss: tuple[Bilingual, ...] = ()
    timings: tuple[tuple[Bilingual, int], ...] = field(default=())

    def challenge(self, challenge_id: str) -> Challenge | None:
        return next((c for c in self.challenges if c.id == challenge_id), None)


class GoalError(ValueError):
    """A goal declared wrongly (a bug of the lesson, found when it is loaded)."""


def _bilingual(text: Any, where: str) -> None:
    if not isinstance(text, dict) or any(not (text.get(k) or "").strip() for k in LANGUAGES):
        raise GoalError(f"{where} needs a text in each of {', '.join(LANGUAGES)}")


def check_goal(goal: Goal, where: str) -> Goal:
    """`goal`, if it has 2-4 outcomes, 4-8 challenges with unique ids, and every text in
    both languages; GoalError naming what is wrong otherwise."""
    if not 2 <= len(goal.outcomes) <= 4:
        raise GoalError(f"{where}: 2 to 4 outcomes, not {len(goal.outcomes)}")
    if not 4 <= len(goal.challenges) <= 8:
        raise GoalError(f"{where}: 4 to 8 challenges, not {len(goal.challenges)}")
    ids = [c.id for c in goal.challenges]
    if len(set(ids)) != len(ids):
        raise GoalError(f"{where}: challenge ids repeat: {ids}")
    for n, text in enumerate((*goal.outcomes, *goal.discuss), 1):
        _bilingual(text, f"{where} outcome/discussion {n}")
    for part, minutes in goal.timings:
        _bilingual(part, f"{where} timing")
        if minutes <= 0:
            raise GoalError(f"{where}: a timing of {minutes} minutes")
    for c in goal.challenges:
        for name in ("text", "hint", "answer", "why"):
            _bilingual(getattr(c, name), f"{where} challenge {c.id} {name}")
        if c.ask is not None:
            _bilingual(c.ask.prompt, f"{where} challenge {c.id} prompt")
    return goal


def load_goal(package: str) -> Goal:
    """The goal the lesson in `package` declares (`<package>.challenges.GOAL`), checked."""
    module = importlib.import_module(f"{package}.challenges")
    return check_goal(module.GOAL, f"{package}/challenges.py")
