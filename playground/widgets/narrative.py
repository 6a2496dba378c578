"""The narrative panel: the lesson step the time cursor is in, with its formula and number.

A `playground/` widget of docs/design.md. Before any cursor it shows the lesson's
summary and the list of its steps; then the step whose phases include the
phase of the Action under the cursor (title, body, formula), and the value of
the Metric the step quotes, for the series under the cursor (the schedule or
ZeRO stage the Action belongs to, read from its `series` field).

Imports: textual and the lesson contract's pure types; never torch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from textual.content import Content
from textual.widgets import Static

from playground.formatting import format_value, localized
from runtime.sim.program import Action
from runtime.sim.trace import Span
from scenarios.base import STRAGGLER_PHASE, Lesson, NarrativeStep
from scenarios.metrics import Metric, find


def metric_line(
    step: NarrativeStep, metrics: list[Metric], series: str | None, language: str = "en"
) -> str:
    """`name = value` of the metric the step quotes (measured, else predicted), its value
    in `language` (a text's Spanish twin, a flag's sí/no)."""
    if not step.metric:
        return ""
    metric = find(metrics, step.metric, series)
    if metric is None:
        return ""
    metric = localized(metric, language)
    value = metric.value if metric.value is not None else metric.predicted
    return f"{metric.name} = {format_value(metric.unit, value, language)}"


def step_starts(
    lesson: Lesson,
    actions: Mapping[str, Action],
    spans: Iterable[Span],
    waits_for_straggler: Callable[[Span], bool] = lambda _span: False,
) -> list[float | None]:
    """Where each narrative step begins on a timeline: the earliest start of a span whose
    Action is in one of the step's phases (the straggler step: the first wait for a
    straggler), None for a step this timeline has no span of. `n` jumps the cursor
    there, so the story is told in the narrative's order whatever the timeline's."""
    phase_step: dict[str, int] = {}
    for index, step in enumerate(lesson.narrative):
        for phase in step.phases:
            phase_step.setdefault(phase, index)  # as step_for_phase: the first step wins
    straggler = phase_step.get(STRAGGLER_PHASE)
    starts: list[float | None] = [None] * len(lesson.narrative)
    for span in spans:
        action = actions.get(span.action_id or "")
        index = phase_step.get(action.phase) if action is not None and action.phase else None
        if straggler is not None and waits_for_straggler(span):
            index = straggler
        if index is None:
            continue
        current = starts[index]
        if current is None or span.start < current:
            starts[index] = span.start
    return starts


def narrative_content(
    lesson: Lesson, language: str, step_index: int | None, metric: str
) -> Content:
    """The current step (title, body, formula, measured number) or, before any
    cursor, the lesson's summary and the list of its steps."""
    if step_index is None:
        lines: list[Content | str] = [Content.styled(lesson.summary[language], "italic")]
        for n, step in enumerate(lesson.narrative, 1):
            lines.append(Content.styled(f"{n}. {step.title[language]}", "bold"))
        return Content("\n").join(lines)
    step = lesson.narrative[step_index]
    parts: list[str | tuple[str, str]] = [
        (f"{step_index + 1}/{len(lesson.narrative)} · {step.title[language]}", "bold"),
        "\n",
        step.body[language],
    ]
    if step.formula:
        parts += ["\n\n", (step.formula, "bold $text-accent")]
    if metric:
        parts += ["\n", (metric, "$text-success")]
    return Content.assemble(*parts)


class NarrativePanel(Static):
    """Remembers the last step, so the text stays put while the cursor is between spans."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.step_index: int | None = None

    def show(
        self,
        lesson: Lesson,
        language: str,
        step_index: int | None,
        metric: str,
    ) -> None:
        self.step_index = step_index
        self.update(narrative_content(lesson, language, step_index, metric))

    def show_overview(self, content: Content) -> None:
        """The lesson's goal and challenges in the step's place (no step is current)."""
        self.step_index = None
        self.update(content)
        self.scroll_home(animate=False)
